//go:build !unix

package testenv

import "os"

// Elsewhere the turns hold within a process only: run `go test -p 1` there.
func flock(*os.File, bool) error { return nil }
func funlock(*os.File) error     { return nil }
