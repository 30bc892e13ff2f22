package harness

import (
	"fmt"
	"time"
)

// progressLoop prints line(now) about once per cfg.ProgressEvery until stop
// closes, then once more as the final line, and closes done. On a terminal
// (ProgressTTY) each line overwrites the last. Without cfg.Progress it only
// waits for stop.
func progressLoop(cfg Config, line func(now time.Time) string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if cfg.Progress == nil {
		<-stop
		return
	}
	t := time.NewTicker(cfg.ProgressEvery)
	defer t.Stop()
	print := func(final bool) {
		l := line(time.Now())
		switch {
		case cfg.ProgressTTY && final:
			fmt.Fprintf(cfg.Progress, "\r%s\033[K\n", l)
		case cfg.ProgressTTY:
			fmt.Fprintf(cfg.Progress, "\r%s\033[K", l)
		default:
			fmt.Fprintln(cfg.Progress, l)
		}
	}
	for {
		select {
		case <-stop:
			print(true)
			return
		case <-t.C:
			print(false)
		}
	}
}
