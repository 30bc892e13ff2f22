package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

// TestMain lets a test run this binary as the command itself: with
// SECKILL_DRAW_RUN_MAIN=1 it is main(), exit code and all.
func TestMain(m *testing.M) {
	exitsleep.Skip() // first: it starts the binary again
	if os.Getenv("SECKILL_DRAW_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func draw(t *testing.T) room.PublicDraw {
	t.Helper()
	seed := room.NewSeed()
	pre := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	order, err := room.DrawOrder(seed, pre)
	if err != nil {
		t.Fatal(err)
	}
	return room.PublicDraw{ItemID: 9, Commitment: seed.Commitment(), Seed: seed.String(), PreQueue: pre, Served: order[:5]}
}

// command runs the command as a process on the JSON of d, from a file or
// (file "") stdin, and returns its output and exit code.
func command(t *testing.T, doc string, fromFile bool) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var args []string
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
	wrongSeed := good
	wrongSeed.Seed = room.NewSeed().String()
	reordered := good
	reordered.Served = slices.Clone(good.Served)
	reordered.Served[0], reordered.Served[1] = reordered.Served[1], reordered.Served[0]
	cases := []struct {
		name     string
		doc      string
		fromFile bool
		code     int
		says     string
	}{
		{"matches, stdin", encode(t, good), false, 0, "verdict: the draw checks out"},
		{"matches, file", encode(t, good), true, 0, "order: the 5 served tickets are the draw's first 5"},
		{"wrong seed", encode(t, wrongSeed), true, 1, "commitment: DOES NOT match"},
		{"reordered", encode(t, reordered), false, 1, "order: DOES NOT match: position 1 served ticket"},
		{"no seed yet", `{"item_id":9,"commitment":"ab","pre_queue":[1],"served":[]}`, false, 2, "not revealed"},
		{"not json", `{"item_id":`, false, 2, "reading the draw"},
		{"unknown field", `{"item_id":9,"sead":"00"}`, false, 2, "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := command(t, c.doc, c.fromFile)
			if code != c.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, c.code, out)
			}
			if !strings.Contains(out, c.says) {
				t.Errorf("output does not say %q:\n%s", c.says, out)
			}
		})
	}
}
