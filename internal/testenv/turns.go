package testenv

import (
	"fmt"
	"os"
	"path/filepath"
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
//     thousand orders on SQLite) calls Heavy: Heavy tests may run together,
//     but never beside a Solo one.
//
// The turn is a lock on one file in the temporary directory (flock: Solo
// takes it exclusive, Heavy shared), so it also holds between two `go test`
// commands on the machine, and the kernel drops it when a process dies.
// Within a process a counter and a condition do the same: a Solo call
// waits for the process's Heavy turns to end and keeps new ones waiting, a
// Heavy call made inside a Solo test (a proof run by a latency-bound test)
// is part of its turn, and one made while the process already holds a
// Heavy turn shares it at once, so neither deadlocks.

// turnLock is one file's turns; the package uses one for every process of
// the machine (TurnsFile).
type turnLock struct {
	path string

	mu          sync.Mutex
	cond        *sync.Cond
	solo        bool // this process holds the Solo turn
	soloWaiting int  // Solo calls waiting for the Heavy turns to end
	heavy       int  // Heavy turns this process holds (one shared file lock)

	once sync.Once
	f    *os.File
	err  error
}

var turns = newTurnLock(TurnsFile())

func newTurnLock(path string) *turnLock {
	l := &turnLock{path: path}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// TurnsFile is the file whose lock orders Solo and Heavy tests across
// processes.
func TurnsFile() string { return filepath.Join(os.TempDir(), "seckill-test-turns.lock") }

func (l *turnLock) file() (*os.File, error) {
	l.once.Do(func() {
		l.f, l.err = os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o666)
	})
	return l.f, l.err
}

// Solo waits until no Heavy test runs in any package, then keeps them
// waiting until t and its subtests end. For tests that bound a latency.
func Solo(t testing.TB) { turns.soloTest(t) }

// SoloTurn is Solo for a TestMain (a whole package of latency-bound tests):
// call release when the tests are done.
func SoloTurn() (release func(), err error) { return turns.soloTurn() }

// Heavy waits while a Solo test runs in any package, then holds a shared
// turn until t ends. Inside a Solo test of this process it is part of that
// turn and waits for nothing.
func Heavy(t testing.TB) { turns.heavyTest(t) }

func (l *turnLock) soloTest(t testing.TB) {
	t.Helper()
	release, err := l.soloTurn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
}

func (l *turnLock) soloTurn() (release func(), err error) {
	f, err := l.file()
	if err != nil {
		return nil, fmt.Errorf("testenv: turns file: %w", err)
	}
	l.mu.Lock()
	l.soloWaiting++
	for l.solo || l.heavy > 0 {
		l.cond.Wait()
	}
	l.soloWaiting--
	l.solo = true
	l.mu.Unlock()
	if err := flock(f, true); err != nil {
		l.endSolo()
		return nil, fmt.Errorf("testenv: solo turn: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = funlock(f)
			l.endSolo()
		})
	}, nil
}

func (l *turnLock) endSolo() {
	l.mu.Lock()
	l.solo = false
	l.cond.Broadcast()
	l.mu.Unlock()
}

func (l *turnLock) heavyTest(t testing.TB) {
	t.Helper()
	f, err := l.file()
	if err != nil {
		t.Fatalf("testenv: turns file: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.solo:
		return // this process's Solo test runs it: only its own subtests run now
	case l.heavy == 0:
		// A Solo call waiting here goes first; a Heavy turn already held is
		// shared at once (waiting then could deadlock a test that holds one).
		for l.solo || l.soloWaiting > 0 {
			l.cond.Wait()
		}
		if err := flock(f, false); err != nil {
			t.Fatalf("testenv: heavy turn: %v", err)
		}
	}
	l.heavy++
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.heavy--
		if l.heavy == 0 {
			_ = funlock(f)
			l.cond.Broadcast()
		}
	})
}
