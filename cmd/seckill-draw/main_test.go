package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// TestMain lets a test run this binary as the command itself: with
// SECKILL_DRAW_RUN_MAIN=1 it is main(), exit code and all.
func TestMain(m *testing.M) {
	if os.Getenv("SECKILL_DRAW_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// draw is an honest document of 8 tickets, 5 served, with the history the
// service records.
func draw(t *testing.T) room.PublicDraw {
	t.Helper()
	seed := room.NewSeed()
	d := room.PublicDraw{ItemID: 9, Commitment: seed.Commitment(), Seed: seed.String(), PreQueue: []int64{1, 2, 3, 4, 5, 6, 7, 8}, Line: 1}
	redraw(t, &d, seed)
	n := int64(len(d.PreQueue))
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	d.History = []room.DrawLine{{Line: 1, Commitment: seed.Commitment(), Lottery: true, PublishedAt: at, Seed: seed.String(),
		PreQueueSize: &n, Transcript: d.Transcript, RevealedAt: &at}}
	return d
}

// redraw sets d's leaves (ticket n's string is "tk-n"), transcript and 5
// served tickets from its pre-queue and seed: what an operator rewriting
// the document consistently would publish.
func redraw(t *testing.T, d *room.PublicDraw, seed room.Seed) {
	t.Helper()
	leaves := make([][32]byte, len(d.PreQueue))
	d.Leaves = make([]string, len(d.PreQueue))
	for i, tk := range d.PreQueue {
		leaves[i] = room.TicketLeaf(fmt.Sprintf("tk-%d", tk))
		d.Leaves[i] = hex.EncodeToString(leaves[i][:])
	}
	tr := room.TranscriptOf(leaves)
	d.Transcript = tr.String()
	order, err := room.DrawOrder(seed, tr, d.PreQueue)
	if err != nil {
		t.Fatal(err)
	}
	d.Served = order[:min(5, len(order))]
}

// command runs the command as a process on the JSON of d, from a file or
// (file "") stdin, and returns its output and exit code.
func command(t *testing.T, doc string, fromFile bool, flags ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(flags)
	if fromFile {
		p := filepath.Join(t.TempDir(), "draw.json")
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "SECKILL_DRAW_RUN_MAIN=1")
	cmd.Stdin = strings.NewReader(doc)
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("run command: %v", err)
	}
	return string(out), code
}

func encode(t *testing.T, d room.PublicDraw) string {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCommand(t *testing.T) {
	good := draw(t)
	observed := good.Commitment
	wrongSeed := good
	wrongSeed.Seed = room.NewSeed().String()
	reordered := good
	reordered.Served = slices.Clone(good.Served)
	reordered.Served[0], reordered.Served[1] = reordered.Served[1], reordered.Served[0]

	// The operator swapped seed and commitment after seeing the queue
	// (redteam draw_swap.py): self-consistent, history rewritten too.
	swapped := good
	s := room.NewSeed()
	swapped.Commitment, swapped.Seed = s.Commitment(), s.String()
	redraw(t, &swapped, s)
	swapped.History = slices.Clone(good.History)
	swapped.History[0].Commitment, swapped.History[0].Seed = s.Commitment(), s.String()

	// Ticket 4 left out of the pre-queue (draw_tool.py).
	missing := good
	missing.PreQueue = []int64{1, 2, 3, 5, 6, 7, 8}
	redraw(t, &missing, mustSeed(t, good.Seed))

	// A leaf left out of the transcript (the order drawn without it).
	noLeaf := good
	noLeaf.Leaves = good.Leaves[:7]
	var ls [][32]byte
	for _, l := range noLeaf.Leaves {
		v, _ := room.ParseTranscript(l)
		ls = append(ls, v)
	}
	ntr := room.TranscriptOf(ls)
	order, _ := room.DrawOrder(mustSeed(t, good.Seed), ntr, good.PreQueue)
	noLeaf.Transcript, noLeaf.Served = ntr.String(), order[:5]

	// A transcript that is not the leaves' (the order drawn with it).
	wrongT := good
	var wt room.Transcript
	wt[0] = 1
	order, _ = room.DrawOrder(mustSeed(t, good.Seed), wt, good.PreQueue)
	wrongT.Transcript, wrongT.Served = wt.String(), order[:5]
	wrongT.History = slices.Clone(good.History)
	wrongT.History[0].Transcript = wt.String()

	// Redis lost the room after the opening (draw_after_loss.py).
	emptied := good
	emptied.PreQueue = []int64{}
	redraw(t, &emptied, mustSeed(t, good.Seed))

	// The room was turned off and on: the document is line 2's, the
	// buyer holds line 1's commitment.
	oldLine := good
	old := room.NewSeed().Commitment()
	oldLine.Line = 2
	oldLine.History = append([]room.DrawLine{{Line: 1, Commitment: old, Lottery: true, PublishedAt: good.History[0].PublishedAt}}, good.History...)
	oldLine.History[1].Line = 2

	ticketFile := filepath.Join(t.TempDir(), "ticket.json")
	if err := os.WriteFile(ticketFile, []byte(`{"ticket":"tk-3","number":3,"state":"waiting","commitment":"`+observed+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	notMine := `{"ticket":"tk-3","number":4,"commitment":"` + observed + `"}`
	cm := []string{"-commitment", observed}
	cases := []struct {
		name     string
		doc      string
		fromFile bool
		flags    []string
		code     int
		says     string
	}{
		{"matches, stdin", encode(t, good), false, cm, 0, "verdict: the draw checks out"},
		{"matches, file", encode(t, good), true, cm, 0, "order: the 5 served tickets are the draw's first 5"},
		{"matches, ticket file", encode(t, good), false, []string{"-ticket", ticketFile}, 0, "observed: the document's commitment is the one you observed (line 1)"},
		{"matches, ticket json", encode(t, good), true, []string{"-ticket", `{"commitment":"` + observed + `"}`}, 0, "record: the database recorded line 1's opening: the same seed, 8 tickets, the same transcript"},
		{"my ticket is leaf 3", encode(t, good), false, []string{"-ticket", ticketFile}, 0, "your ticket: its leaf (SHA-256 of your ticket string) is leaf 3"},
		{"my ticket is not at my number", encode(t, good), false, []string{"-ticket", notMine}, 1, "your ticket: DOES NOT appear"},
		{"a leaf left out", encode(t, noLeaf), false, cm, 1, "transcript: DOES NOT cover the pre-queue: 7 leaves for 8 tickets"},
		{"wrong transcript", encode(t, wrongT), false, cm, 1, "transcript: DOES NOT match the leaves"},
		{"swapped after the queue", encode(t, swapped), false, cm, 1, "observed: DOES NOT match"},
		{"ticket 4 left out", encode(t, missing), false, cm, 1, "pre-queue: DOES NOT hold every ticket 1..7: ticket 4 is missing"},
		{"emptied by a redis loss", encode(t, emptied), false, cm, 1, "the database recorded 8 tickets in the pre-queue at the opening, the document lists 0"},
		{"observed an older line", encode(t, oldLine), false, []string{"-commitment", old}, 1, "is line 1 of the item, the document's " + good.Commitment + " is line 2"},
		{"emptied, says so", encode(t, emptied), false, cm, 1, "pre-queue: empty"},
		{"wrong seed", encode(t, wrongSeed), true, cm, 1, "commitment: DOES NOT match"},
		{"reordered", encode(t, reordered), false, cm, 1, "order: DOES NOT match: position 1 served ticket"},
		{"no observed commitment", encode(t, good), false, nil, 2, "give the commitment you observed"},
		{"ticket without commitment", encode(t, good), false, []string{"-ticket", `{"ticket":"x"}`}, 2, "carries no commitment"},
		{"no seed yet", `{"item_id":9,"commitment":"ab","pre_queue":[1],"served":[]}`, false, cm, 2, "not revealed"},
		{"not json", `{"item_id":`, false, cm, 2, "reading the draw"},
		{"unknown field", `{"item_id":9,"sead":"00"}`, false, cm, 2, "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := command(t, c.doc, c.fromFile, c.flags...)
			if code != c.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, c.code, out)
			}
			if !strings.Contains(out, c.says) {
				t.Errorf("output does not say %q:\n%s", c.says, out)
			}
		})
	}
}

func mustSeed(t *testing.T, s string) room.Seed {
	t.Helper()
	seed, err := room.ParseSeed(s)
	if err != nil {
		t.Fatal(err)
	}
	return seed
}
