package testenv

import (
	"sync"
	"testing"
	"time"
)

// RunTogether's cases run at once, outside the -parallel limit: three
// cases each wait until all three have started.
func TestRunTogetherRunsCasesAtOnce(t *testing.T) {
	var started sync.WaitGroup
	started.Add(3)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	RunTogether(t, []string{"a", "b", "c"}, func(s string) string { return s }, func(t *testing.T, _ string) {
		started.Done()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			t.Error("the other cases did not start within 10s: the cases ran one after another")
		}
	})
}
