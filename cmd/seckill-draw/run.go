package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/seckill/seckill/internal/room"
)

const usage = "usage: seckill-draw [file.json]   (reads stdin without a file)\n"

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	in := stdin
	switch {
	case len(args) > 1 || (len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help")):
		fmt.Fprint(stderr, usage)
		return 2
	case len(args) == 1 && args[0] != "-":
		f, err := os.Open(args[0])
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
	c, err := d.Verify()
	if err != nil {
		fmt.Fprintf(stderr, "seckill-draw: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "item %d: %d tickets in the pre-queue, %d served\n", d.ItemID, len(d.PreQueue), len(d.Served))
	if c.CommitmentMatches {
		fmt.Fprintln(stdout, "commitment: matches the seed")
	} else {
		fmt.Fprintf(stdout, "commitment: DOES NOT match the seed (SHA-256 of the seed is %s)\n", seedCommitment(d.Seed))
	}
	switch {
	case c.Err != nil:
		fmt.Fprintf(stdout, "order: cannot be drawn: %v\n", c.Err)
	case c.OrderMatches:
		fmt.Fprintf(stdout, "order: the %d served tickets are the draw's first %d\n", len(d.Served), len(d.Served))
	case c.Mismatch >= len(c.Drawn):
		fmt.Fprintf(stdout, "order: DOES NOT match: served ticket %d (position %d) is beyond the %d drawn\n", d.Served[c.Mismatch], c.Mismatch+1, len(c.Drawn))
	default:
		fmt.Fprintf(stdout, "order: DOES NOT match: position %d served ticket %d, the draw gives ticket %d\n", c.Mismatch+1, d.Served[c.Mismatch], c.Drawn[c.Mismatch])
	}
	if !c.OK() {
		fmt.Fprintln(stdout, "verdict: the draw does not check out")
		return 1
	}
	fmt.Fprintln(stdout, "verdict: the draw checks out")
	return 0
}

func seedCommitment(hexSeed string) string {
	s, err := room.ParseSeed(hexSeed)
	if err != nil {
		return "?"
	}
	return s.Commitment()
}
