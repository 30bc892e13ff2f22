package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// Turns between packages. `go test ./...` runs several packages' test
// binaries at once (-p, GOMAXPROCS by default: two on the project's
// machine). Two kinds of test must not meet, whichever packages they are
// in:
//
//   - a test that bounds a latency (an answer within the request timeout
//     during an outage, a lock's watchdog renewing a 100 ms lease) calls
//     Solo: while it runs, no Heavy test of any package does;
//   - a test that keeps both cores busy (a concurrency proof, a stampede, a
//     thousand orders on SQLite) calls Heavy.
//
// Solo tests run together, and so do Heavy ones (they mostly wait, or take
// turns within their package); only the two kinds exclude each other. Across
// processes this is three locks on files in the temporary directory
// (flock, so the kernel drops them when a process dies): a Solo process
// holds "solo" shared, a Heavy one "heavy" shared; to enter, a process
// takes "gate" exclusively, then the other kind's file exclusively (it
// waits there until that kind has drained), takes its own kind's file
// shared, and lets the other two go. Entries pass the gate one at a time,
// so a waiting Solo keeps new Heavy tests out and is not starved, and the
// files are always taken in the same order (gate, then the others), so no
// two entries wait for each other. Within a process a counter and a
// condition do the same, and the process takes the files once per kind.
//
// A Solo test must not call Heavy itself (it would wait for its own end),
// and should not be a parallel test: its parallel subtests would then wait
// for a -parallel slot that the package's Heavy tests hold while they wait
// for the Solo turn to end. A serial test runs while no parallel test of
// its package does, so its subtests find the slots free.
// A process started by one holding a Solo turn (a test binary re-run as a
// helper) is part of that turn: its own calls return at once.

// turnLock is the turns of one directory; the package uses one for every
// process of the machine (TurnsDir).
type turnLock struct {
	dir string

	mu          sync.Mutex
	cond        *sync.Cond
	solo        int // Solo turns this process holds
	alone       bool
	soloWaiting int // Solo calls waiting for this process's Heavy turns to end
	heavy       int // Heavy turns this process holds

	once              sync.Once
	gate, soloF, hvyF *os.File
	err               error
}

var turns = newTurnLock(TurnsDir())

func newTurnLock(dir string) *turnLock {
	l := &turnLock{dir: dir}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// TurnsDir holds the files whose locks order Solo and Heavy tests across
// processes.
func TurnsDir() string { return os.TempDir() }

func (l *turnLock) files() error {
	l.once.Do(func() {
		open := func(name string) *os.File {
			if l.err != nil {
				return nil
			}
			var f *os.File
			f, l.err = os.OpenFile(filepath.Join(l.dir, "seckill-test-turns-"+name+".lock"), os.O_RDWR|os.O_CREATE, 0o666)
			return f
		}
		l.gate, l.soloF, l.hvyF = open("gate"), open("solo"), open("heavy")
	})
	if l.err != nil {
		return fmt.Errorf("testenv: turns files: %w", l.err)
	}
	return nil
}

// enter takes mine shared once other (the other kind's file) has drained.
func (l *turnLock) enter(mine, other *os.File) error {
	if err := flock(l.gate, true); err != nil {
		return err
	}
	defer funlock(l.gate) //nolint:errcheck
	if err := flock(other, true); err != nil {
		return err
	}
	defer funlock(other) //nolint:errcheck
	return flock(mine, false)
}

// inheritedTurn is set in the environment of a process holding the Solo
// turn, so the processes it starts (a test binary re-run as a helper, as
// internal/lock's killed-holder test does) are part of its turn instead of
// waiting for it.
const inheritedTurn = "SECKILL_TEST_SOLO_TURN_HELD"

// inherited: a parent process holds the Solo turn for this one.
func inherited() bool {
	v := os.Getenv(inheritedTurn)
	return v != "" && v != strconv.Itoa(os.Getpid())
}

// Solo waits until no Heavy test runs in any package, then keeps them
// waiting until t and its subtests end. For tests that bound a latency.
func Solo(t testing.TB) {
	t.Helper()
	release, err := turns.soloTurn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
}

// SoloTurn is Solo for a TestMain (a whole package of latency-bound tests):
// call release when the tests are done, or let the process's exit drop it.
func SoloTurn() (release func(), err error) { return turns.soloTurn() }

// Heavy waits while a Solo test runs in any package, then holds a shared
// turn until t ends.
func Heavy(t testing.TB) {
	t.Helper()
	if err := turns.heavyTurn(t); err != nil {
		t.Fatal(err)
	}
}

func (l *turnLock) soloTurn() (release func(), err error) {
	if inherited() {
		return func() {}, nil // a parent process holds it for us
	}
	if err := l.files(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.soloWaiting++
	for l.heavy > 0 || l.alone {
		l.cond.Wait()
	}
	l.soloWaiting--
	if l.solo == 0 {
		if err := l.enter(l.soloF, l.hvyF); err != nil {
			l.cond.Broadcast()
			return nil, fmt.Errorf("testenv: solo turn: %w", err)
		}
		_ = os.Setenv(inheritedTurn, strconv.Itoa(os.Getpid()))
	}
	l.solo++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.solo--
			if l.solo == 0 {
				_ = os.Unsetenv(inheritedTurn)
				_ = funlock(l.soloF)
				l.cond.Broadcast()
			}
		})
	}, nil
}

// Alone waits until no Solo or Heavy test runs in any package, then keeps
// both waiting until t ends. For the few tests whose latency bound is too
// tight to share the cores even with tests that mostly wait.
func Alone(t testing.TB) {
	t.Helper()
	AloneUntil(t)
}

// AloneUntil is Alone, ended by the returned release (at t's end at the
// latest): for a test whose bounded part ends before its checks and its
// cleanup (stopping processes) do.
func AloneUntil(t testing.TB) (release func()) {
	t.Helper()
	release, err := turns.aloneTurn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return release
}

// aloneTurn holds the solo file exclusively: it passes the gate, drains
// the Heavy turns, then waits for the Solo ones; entries behind it wait at
// the gate.
func (l *turnLock) aloneTurn() (release func(), err error) {
	if inherited() {
		return func() {}, nil
	}
	if err := l.files(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.soloWaiting++
	for l.heavy > 0 || l.solo > 0 || l.alone {
		l.cond.Wait()
	}
	l.soloWaiting--
	err = func() error {
		if err := flock(l.gate, true); err != nil {
			return err
		}
		defer funlock(l.gate) //nolint:errcheck
		if err := flock(l.hvyF, true); err != nil {
			return err
		}
		defer funlock(l.hvyF) //nolint:errcheck
		return flock(l.soloF, true)
	}()
	if err != nil {
		l.cond.Broadcast()
		return nil, fmt.Errorf("testenv: alone turn: %w", err)
	}
	l.alone = true
	_ = os.Setenv(inheritedTurn, strconv.Itoa(os.Getpid()))
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			_ = os.Unsetenv(inheritedTurn)
			_ = funlock(l.soloF)
			l.alone = false
			l.cond.Broadcast()
		})
	}, nil
}

func (l *turnLock) heavyTurn(t testing.TB) error {
	if inherited() {
		return nil // started by a process holding a Solo turn: part of it
	}
	if err := l.files(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.solo > 0 || l.soloWaiting > 0 || l.alone {
		l.cond.Wait()
	}
	if l.heavy == 0 {
		if err := l.enter(l.hvyF, l.soloF); err != nil {
			l.cond.Broadcast()
			return fmt.Errorf("testenv: heavy turn: %w", err)
		}
	}
	l.heavy++
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.heavy--
		if l.heavy == 0 {
			_ = funlock(l.hvyF)
			l.cond.Broadcast()
		}
	})
	return nil
}
