//go:build unix

package testenv

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
