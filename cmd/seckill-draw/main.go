// Command seckill-draw checks a waiting room's opening draw from its public
// data against the commitment the buyer observed before the opening (their
// ticket carries it, and so does the item view): that the document's
// commitment is that one, that the revealed seed matches it, that the
// pre-queue is every ticket 1..N and the N the database recorded at the
// opening, and that the pre-queue was served in the order the seed gives
// (docs/DESIGN.md, "Waiting room", states the algorithm).
//
//	seckill-draw -commitment HEX [file.json]     (stdin without a file)
//	seckill-draw -ticket my-ticket.json [file.json]
//
// The input is GET /api/v1/items/{id}/draw: {"item_id", "lottery",
// "commitment", "seed", "pre_queue": [tickets], "served": [tickets],
// "line", "history": [lines]}. Exit status: 0 the draw checks out, 1 it
// does not, 2 the input could not be read.
package main

import (
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
