// Command seckill-draw checks a waiting room's opening draw from its public
// data against the commitment the buyer observed before the opening (their
// ticket carries it, and so does the item view): that the document's
// commitment is that one, that the revealed seed matches it, that the
// pre-queue is every ticket 1..N and the N the database recorded at the
// opening, that its leaves hash to the published transcript (the one
// recorded at the opening), that the buyer's own ticket string (-ticket)
// is the leaf at its number, and that the pre-queue was served in the
// order the seed and the transcript give (docs/API.md, "Checking the draw
// by hand", states the algorithm).
//
//	seckill-draw -commitment HEX [file.json]     (stdin without a file)
//	seckill-draw -ticket my-ticket.json [file.json]
//
// The input is GET /api/v1/items/{id}/draw: {"item_id", "lottery",
// "commitment", "seed", "pre_queue": [tickets], "transcript", "leaves":
// [hex], "served": [tickets],
// "line", "history": [lines]}. Exit status: 0 the draw checks out, 1 it
// does not, 2 the input could not be read.
package main

import (
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
