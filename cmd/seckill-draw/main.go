// Command seckill-draw checks a waiting room's opening draw from its public
// data: that the revealed seed matches the commitment published before the
// opening, and that the pre-queue was served in the order the seed gives
// (docs/DESIGN.md, "Waiting room", states the algorithm).
//
//	seckill-draw [file.json]     (stdin without a file)
//
// The input is {"item_id", "commitment", "seed", "pre_queue": [tickets],
// "served": [tickets]}. Exit status: 0 the draw checks out, 1 it does not,
// 2 the input could not be read.
package main

import (
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
