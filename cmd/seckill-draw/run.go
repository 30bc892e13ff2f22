package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/seckill/seckill/internal/room"
)

const usage = `usage: seckill-draw (-commitment HEX | -ticket FILE|JSON) [file.json]
  reads the draw document from file.json, or stdin without one
  -commitment HEX   the commitment you saw before the opening (item view's waiting_room.commitment)
  -ticket FILE|JSON your saved join or status answer (its "commitment")
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seckill-draw", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	commitment := fs.String("commitment", "", "")
	ticket := fs.String("ticket", "", "")
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "seckill-draw: %v\n", err)
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	observed, mine, err := observedCommitment(*commitment, *ticket)
	if err != nil {
		fmt.Fprintf(stderr, "seckill-draw: %v\n", err)
		fmt.Fprint(stderr, usage)
		return 2
	}
	in := stdin
	switch rest := fs.Args(); {
	case len(rest) > 1:
		fmt.Fprint(stderr, usage)
		return 2
	case len(rest) == 1 && rest[0] != "-":
		f, err := os.Open(rest[0])
		if err != nil {
			fmt.Fprintf(stderr, "seckill-draw: %v\n", err)
			return 2
		}
		defer f.Close()
		in = f
	}
	// The service's document (GET /api/v1/items/{id}/draw) is a
	// room.PublicDraw with "lottery" beside it.
	var doc struct {
		room.PublicDraw
		Lottery *bool `json:"lottery"`
	}
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		fmt.Fprintf(stderr, "seckill-draw: reading the draw: %v\n", err)
		return 2
	}
	d := doc.PublicDraw
	if doc.Lottery != nil && !*doc.Lottery {
		fmt.Fprintf(stdout, "item %d: no lottery: the waiting room serves its tickets in number order; there is no draw to check\n", d.ItemID)
		return 0
	}
	a, err := d.Audit(observed)
	if err != nil {
		fmt.Fprintf(stderr, "seckill-draw: %v\n", err)
		return 2
	}
	report(stdout, d, a)
	held := true
	if mine.Ticket != "" {
		held = d.HoldsTicket(mine.Number, mine.Ticket)
		if held {
			fmt.Fprintf(stdout, "your ticket: its leaf (SHA-256 of your ticket string) is leaf %d of the transcript\n", mine.Number)
		} else {
			fmt.Fprintf(stdout, "your ticket: DOES NOT appear: leaf %d of the document is not the SHA-256 of your ticket string (or your number %d is past its %d leaves)\n",
				mine.Number, mine.Number, len(d.Leaves))
		}
	}
	if !a.OK() || !held {
		fmt.Fprintln(stdout, "verdict: the draw does not check out")
		return 1
	}
	fmt.Fprintln(stdout, "verdict: the draw checks out")
	return 0
}

// savedTicket is a buyer's saved join or status answer.
type savedTicket struct {
	Ticket     string `json:"ticket"`
	Number     int64  `json:"number"`
	Commitment string `json:"commitment"`
}

// observedCommitment is the commitment the buyer gave: -commitment, or the
// "commitment" of the ticket answer -ticket names (a file, or the JSON
// itself), with that answer (its ticket string is then looked for among
// the pre-queue's leaves). Exactly one is needed: a document checked only
// against itself proves nothing (an operator can publish any seed with its
// commitment).
func observedCommitment(commitment, ticket string) (string, savedTicket, error) {
	var t savedTicket
	switch {
	case commitment != "" && ticket != "":
		return "", t, errors.New("give -commitment or -ticket, not both")
	case commitment != "":
		return commitment, t, nil
	case ticket == "":
		return "", t, errors.New("give the commitment you observed before the opening: -commitment HEX or -ticket FILE")
	}
	b := []byte(ticket)
	if !strings.HasPrefix(strings.TrimSpace(ticket), "{") {
		var err error
		if b, err = os.ReadFile(ticket); err != nil {
			return "", t, fmt.Errorf("reading the ticket: %w", err)
		}
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", t, fmt.Errorf("reading the ticket: %w", err)
	}
	if t.Commitment == "" {
		return "", t, errors.New("the ticket carries no commitment (a room without a lottery has no draw)")
	}
	return t.Commitment, t, nil
}

func report(w io.Writer, d room.PublicDraw, a room.Audit) {
	fmt.Fprintf(w, "item %d: %d tickets in the pre-queue, %d served\n", d.ItemID, len(d.PreQueue), len(d.Served))
	line := "not in the history"
	if d.Line > 0 {
		line = fmt.Sprintf("line %d", d.Line)
	}
	switch {
	case a.ObservedMatches:
		fmt.Fprintf(w, "observed: the document's commitment is the one you observed (%s)\n", line)
	case a.ObservedLine > 0:
		fmt.Fprintf(w, "observed: DOES NOT match: your commitment %s is line %d of the item, the document's %s is %s (the room started over, or its commitment was replaced)\n",
			a.Observed, a.ObservedLine, d.Commitment, line)
	default:
		fmt.Fprintf(w, "observed: DOES NOT match: the document's commitment %s is not the one you observed, %s, which its history never published\n",
			d.Commitment, a.Observed)
	}
	if a.CommitmentMatches {
		fmt.Fprintln(w, "commitment: matches the seed")
	} else {
		fmt.Fprintf(w, "commitment: DOES NOT match the seed (SHA-256 of the seed is %s)\n", seedCommitment(d.Seed))
	}
	switch {
	case !a.LeavesWhole:
		fmt.Fprintf(w, "transcript: DOES NOT cover the pre-queue: %d leaves for %d tickets\n", len(d.Leaves), len(d.PreQueue))
	case !a.TranscriptMatches:
		fmt.Fprintf(w, "transcript: DOES NOT match the leaves (their SHA-256 is %s)\n", a.Computed)
	default:
		fmt.Fprintf(w, "transcript: the %d leaves hash to the published transcript\n", len(d.Leaves))
	}
	switch {
	case a.PreQueueWhole && len(d.PreQueue) == 0:
		fmt.Fprintln(w, "pre-queue: empty")
	case a.PreQueueWhole:
		fmt.Fprintf(w, "pre-queue: tickets 1..%d\n", len(d.PreQueue))
	default:
		fmt.Fprintf(w, "pre-queue: DOES NOT hold every ticket 1..%d: ticket %d is missing\n", len(d.PreQueue), a.Missing)
	}
	switch r := a.Recorded; {
	case r == nil:
		fmt.Fprintln(w, "record: DOES NOT exist: the document's history has no line of its commitment")
	case r.PreQueueSize == nil:
		fmt.Fprintf(w, "record: NOT YET: the database has not recorded line %d's opening (try again in a few seconds)\n", r.Line)
	case !strings.EqualFold(r.Seed, d.Seed):
		fmt.Fprintf(w, "record: DOES NOT match: the database recorded seed %s at the opening\n", r.Seed)
	case *r.PreQueueSize != int64(len(d.PreQueue)):
		fmt.Fprintf(w, "record: DOES NOT match: the database recorded %d tickets in the pre-queue at the opening, the document lists %d (the room's draw was lost: it can no longer be checked)\n",
			*r.PreQueueSize, len(d.PreQueue))
	case r.Transcript == "":
		fmt.Fprintf(w, "record: DOES NOT hold a transcript for line %d (opened by a build before transcripts: not checkable)\n", r.Line)
	case !strings.EqualFold(r.Transcript, d.Transcript):
		fmt.Fprintf(w, "record: DOES NOT match: the database recorded transcript %s at the opening\n", r.Transcript)
	default:
		fmt.Fprintf(w, "record: the database recorded line %d's opening: the same seed, %d tickets, the same transcript\n", r.Line, *r.PreQueueSize)
	}
	switch {
	case a.Err != nil:
		fmt.Fprintf(w, "order: cannot be drawn: %v\n", a.Err)
	case a.OrderMatches:
		fmt.Fprintf(w, "order: the %d served tickets are the draw's first %d\n", len(d.Served), len(d.Served))
	case a.Mismatch >= len(a.Drawn):
		fmt.Fprintf(w, "order: DOES NOT match: served ticket %d (position %d) is beyond the %d drawn\n", d.Served[a.Mismatch], a.Mismatch+1, len(a.Drawn))
	default:
		fmt.Fprintf(w, "order: DOES NOT match: position %d served ticket %d, the draw gives ticket %d\n", a.Mismatch+1, d.Served[a.Mismatch], a.Drawn[a.Mismatch])
	}
}

func seedCommitment(hexSeed string) string {
	s, err := room.ParseSeed(hexSeed)
	if err != nil {
		return "?"
	}
	return s.Commitment()
}
