// Command seckill serves the flash-sale API. See README.md.
package main

import (
	"os"

	"github.com/seckill/seckill/internal/app"
)

func main() { os.Exit(app.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }
