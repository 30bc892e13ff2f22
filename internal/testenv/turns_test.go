//go:build unix

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// free reports whether another open file description of f's file could
// take it now (flock locks of two descriptions conflict, even in one
// process), as another package's test binary would.
func free(t *testing.T, f *os.File, exclusive bool) bool {
	t.Helper()
	g, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	how := syscall.LOCK_SH | syscall.LOCK_NB
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	err = syscall.Flock(int(g.Fd()), how)
	if err == syscall.EWOULDBLOCK {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Flock(int(g.Fd()), syscall.LOCK_UN)
	return true
}

// newTestTurns is a turnLock of its own directory (the machine's is shared
// with other packages' tests); two of them on one directory act as two
// processes.
func newTestTurns(t *testing.T, dir string) *turnLock {
	l := newTurnLock(dir)
	if err := l.files(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{l.gate, l.soloF, l.hvyF} {
			f.Close()
		}
	})
	return l
}

func heavy(t *testing.T, l *turnLock) {
	t.Helper()
	if err := l.heavyTurn(t); err != nil {
		t.Fatal(err)
	}
}

func solo(t *testing.T, l *turnLock) func() {
	t.Helper()
	release, err := l.soloTurn()
	if err != nil {
		t.Fatal(err)
	}
	return release
}

func TestTurnsHoldTheirFiles(t *testing.T) {
	l := newTestTurns(t, t.TempDir())
	t.Run("heavy", func(t *testing.T) {
		t.Run("held", func(t *testing.T) {
			heavy(t, l)
			heavy(t, l) // a second in the process shares the one file lock
			if free(t, l.hvyF, true) || !free(t, l.hvyF, false) {
				t.Error("heavy file: want held shared")
			}
			if !free(t, l.soloF, true) || !free(t, l.gate, true) {
				t.Error("solo and gate files: want free")
			}
		})
		if !free(t, l.hvyF, true) {
			t.Error("the Heavy turn outlived its tests")
		}
	})
	t.Run("solo", func(t *testing.T) {
		r1, r2 := solo(t, l), solo(t, l) // Solo turns share too
		if free(t, l.soloF, true) || !free(t, l.soloF, false) || !free(t, l.hvyF, true) {
			t.Error("solo file: want held shared, heavy file free")
		}
		r1()
		if free(t, l.soloF, true) {
			t.Error("the Solo turn ended while one was still held")
		}
		r2()
		if !free(t, l.soloF, true) {
			t.Error("the Solo turn outlived its holders")
		}
	})
}

// Two turnLocks on one directory are two processes: Solo beside Solo
// enters at once, Heavy beside Solo waits for it to end.
func TestTurnsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	a, b := newTestTurns(t, dir), newTestTurns(t, dir)
	releaseA := solo(t, a)
	done := make(chan func(), 1)
	go func() {
		r, err := b.soloTurn()
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		r()
	case <-time.After(10 * time.Second):
		t.Fatal("a Solo turn waited for another process's Solo turn")
	}

	entered := make(chan struct{})
	t.Run("heavy waits", func(t *testing.T) {
		go func() {
			heavy(t, b)
			close(entered)
		}()
		select {
		case <-entered:
			t.Fatal("a Heavy turn entered beside another process's Solo turn")
		case <-time.After(200 * time.Millisecond):
		}
		releaseA()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the Heavy turn did not enter once the Solo turn ended")
		}
	})
}

// Alone keeps every other turn out, of any process, and waits for them.
func TestTurnsAlone(t *testing.T) {
	dir := t.TempDir()
	a, b := newTestTurns(t, dir), newTestTurns(t, dir)
	releaseSolo := solo(t, b)
	got := make(chan func(), 1)
	go func() {
		r, err := a.aloneTurn()
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("Alone entered beside another process's Solo turn")
	case <-time.After(200 * time.Millisecond):
	}
	releaseSolo()
	var releaseAlone func()
	select {
	case releaseAlone = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Alone did not enter once the Solo turn ended")
	}
	if free(t, a.soloF, false) || !free(t, a.gate, true) {
		t.Error("alone: want the solo file held exclusively and the gate free")
	}
	entered := make(chan func(), 1)
	go func() {
		r, err := b.soloTurn()
		if err != nil {
			t.Error(err)
		}
		entered <- r
	}()
	select {
	case <-entered:
		t.Fatal("a Solo turn entered beside Alone")
	case <-time.After(200 * time.Millisecond):
	}
	releaseAlone()
	select {
	case r := <-entered:
		r()
	case <-time.After(10 * time.Second):
		t.Fatal("the Solo turn did not enter once Alone ended")
	}
}

// A process started by one that holds the Solo turn (a test binary re-run
// as a helper) is part of the turn: its own Solo and Heavy calls return at
// once instead of waiting for its parent forever.
func TestTurnsInheritedByChildProcesses(t *testing.T) {
	if dir := os.Getenv("TURNS_TEST_CHILD"); dir != "" {
		l := newTestTurns(t, dir)
		release := solo(t, l)
		release()
		heavy(t, l)
		return
	}
	l := newTestTurns(t, t.TempDir())
	release := solo(t, l)
	defer release()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTurnsInheritedByChildProcesses$")
	cmd.Env = append(os.Environ(), "TURNS_TEST_CHILD="+l.dir)
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
