//go:build unix

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// tryLock reports whether another open file description of the turns file
// can take the lock now (flock locks of two descriptions conflict, even in
// one process), as another package's test binary would.
func tryLock(t *testing.T, path string, exclusive bool) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	how := syscall.LOCK_SH | syscall.LOCK_NB
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	err = syscall.Flock(int(f.Fd()), how)
	if err == syscall.EWOULDBLOCK {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

func TestTurnsKeepHeavyAndSoloApart(t *testing.T) {
	// A file of its own: the machine's is shared with other packages' tests.
	l := newTurnLock(filepath.Join(t.TempDir(), "turns.lock"))
	defer func() {
		if l.f != nil {
			l.f.Close()
		}
	}()
	try := func(t *testing.T, exclusive bool) bool { return tryLock(t, l.path, exclusive) }
	t.Run("heavy", func(t *testing.T) {
		t.Run("held", func(t *testing.T) {
			l.heavyTest(t)
			l.heavyTest(t) // a second in the process shares the one file lock
			if try(t, true) {
				t.Error("a Solo turn elsewhere was possible while Heavy held")
			}
			if !try(t, false) {
				t.Error("a Heavy turn elsewhere was refused beside Heavy")
			}
		})
		if !try(t, true) {
			t.Error("the Heavy turn outlived its test")
		}
	})
	t.Run("solo", func(t *testing.T) {
		t.Run("held", func(t *testing.T) {
			l.soloTest(t)
			l.heavyTest(t) // inside the Solo test: part of its turn, no deadlock
			if try(t, false) {
				t.Error("a Heavy turn elsewhere was possible while Solo held")
			}
		})
		if !try(t, false) {
			t.Error("the Solo turn outlived its test")
		}
	})
}

// A process started by one that holds the Solo turn (a test binary re-run
// as a helper) is part of the turn: its own Solo and Heavy calls return at
// once instead of waiting for its parent forever.
func TestTurnsInheritedByChildProcesses(t *testing.T) {
	if os.Getenv("TURNS_TEST_CHILD") != "" {
		l := newTurnLock(os.Getenv("TURNS_TEST_CHILD"))
		release, err := l.soloTurn()
		if err != nil {
			t.Fatal(err)
		}
		release()
		l.heavyTest(t)
		return
	}
	l := newTurnLock(filepath.Join(t.TempDir(), "turns.lock"))
	defer func() {
		if l.f != nil {
			l.f.Close()
		}
	}()
	release, err := l.soloTurn()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTurnsInheritedByChildProcesses$")
	cmd.Env = append(os.Environ(), "TURNS_TEST_CHILD="+l.path)
	done := make(chan error, 1)
	go func() {
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child waited for its parent's Solo turn")
	}
}
