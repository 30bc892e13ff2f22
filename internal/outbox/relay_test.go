package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"))
}

type fixture struct {
	st   *store.Store
	item int64
	cfg  StreamConfig
	addr string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	addr := testenv.NATSAddr(t)
	b := testenv.Real(t)
	st, err := store.New(b.DB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	it := &stock.Item{Name: "relayed", Stock: 10000, Strategy: stock.StrategyLock}
	if err := st.CreateItem(context.Background(), it, nil); err != nil {
		t.Fatal(err)
	}
	sfx := testenv.Suffix()
	cfg := StreamConfig{Stream: "T_" + sfx, SubjectPrefix: "t" + sfx}
	f := &fixture{st: st, item: it.ID, cfg: cfg, addr: addr}
	t.Cleanup(func() {
		nc, err := nats.Connect("nats://" + addr)
		if err != nil {
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		_ = js.DeleteStream(context.Background(), cfg.Stream)
	})
	return f
}

// orders writes n orders (n created events).
func (f *fixture) orders(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		w := store.OrderWrite{Order: &stock.Order{ID: uuid.NewString(), ItemID: f.item, UserID: fmt.Sprintf("u%s", uuid.NewString()[:8])}}
		if err := f.st.InsertOrder(context.Background(), w, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) publisher(t *testing.T, addr string) *JetStream {
	t.Helper()
	p, err := Connect(context.Background(), "nats://"+addr, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// awaitDrained waits (on the event, polling the database) until no event
// is unpublished.
func (f *fixture) awaitDrained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound for a broken relay, not a latency check
	for {
		n, _, err := f.st.OutboxBacklog(context.Background())
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox not drained: %d left (%v)", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// streamIDs reads every message of the stream and returns the Nats-Msg-Id
// of each, in stream order, failing on a duplicate.
func (f *fixture) streamIDs(t *testing.T) []string {
	t.Helper()
	nc, err := nats.Connect("nats://" + f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, f.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if seen[id] {
			t.Fatalf("event %s twice in the stream", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids
}

// wantExactlyTheOutbox checks the stream holds every event once, in seq order.
func (f *fixture) wantExactlyTheOutbox(t *testing.T, n int) {
	t.Helper()
	ids := f.streamIDs(t)
	evs, err := f.st.EventsAfter(context.Background(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n || len(evs) != n {
		t.Fatalf("stream has %d events, outbox marked %d, want %d", len(ids), len(evs), n)
	}
	for i := range ids {
		if ids[i] != evs[i].ID {
			t.Fatalf("stream position %d holds %s, delivery order %s", i, ids[i], evs[i].ID)
		}
	}
}

// Every event reaches the stream once, in order.
func TestRelayPublishesEveryEventOnce(t *testing.T) {
	f := newFixture(t)
	f.orders(t, 30)
	r := New(f.st, Config{Publisher: f.publisher(t, f.addr)})
	r.Start()
	defer r.Close()
	f.orders(t, 20)
	f.awaitDrained(t)
	f.wantExactlyTheOutbox(t, 50)
}

// A relay whose context is cut after publishing and before marking leaves
// its batch unmarked; the next relay publishes it again and JetStream's
// dedupe drops the copies.
func TestRelayCutBetweenPublishAndMark(t *testing.T) {
	f := newFixture(t)
	f.orders(t, 25)
	ctx, cancel := context.WithCancel(context.Background())
	published := make(chan int, 1)
	first := New(f.st, Config{Publisher: f.publisher(t, f.addr), afterPublish: func(evs []store.Event) {
		published <- len(evs)
		cancel() // the kill: the mark never commits
	}})
	done := make(chan struct{})
	go func() { defer close(done); first.Run(ctx) }()
	n := <-published
	<-done
	if left, _, _ := f.st.OutboxBacklog(context.Background()); left != 25 {
		t.Fatalf("after the cut %d events unpublished, want all 25 (the batch of %d unmarked)", left, n)
	}
	second := New(f.st, Config{Publisher: f.publisher(t, f.addr)})
	second.Start()
	defer second.Close()
	f.awaitDrained(t)
	f.wantExactlyTheOutbox(t, 25)
}

// NATS unreachable: the backlog grows and nothing is lost; back, it is
// drained with nothing twice.
func TestRelaySurvivesNATSOutage(t *testing.T) {
	f := newFixture(t)
	proxy := testenv.NewProxy(t, f.addr)
	r := New(f.st, Config{Publisher: f.publisher(t, proxy.Addr()), PublishTimeout: time.Second})
	r.Start()
	defer r.Close()
	f.orders(t, 10)
	f.awaitDrained(t)
	proxy.Cut()
	f.orders(t, 40)
	if n, _, _ := f.st.OutboxBacklog(context.Background()); n == 0 {
		t.Fatal("events marked published while NATS was cut")
	}
	proxy.Restore()
	f.awaitDrained(t)
	f.wantExactlyTheOutbox(t, 50)
}

// Two relays on one database: each event published once.
func TestTwoRelaysPublishEachEventOnce(t *testing.T) {
	f := newFixture(t)
	a := New(f.st, Config{Publisher: f.publisher(t, f.addr), LeaseRetry: 20 * time.Millisecond})
	b := New(f.st, Config{Publisher: f.publisher(t, f.addr), LeaseRetry: 20 * time.Millisecond})
	a.Start()
	b.Start()
	f.orders(t, 40)
	a.Close() // the holder (whichever) may go: the other takes over
	f.orders(t, 20)
	f.awaitDrained(t)
	b.Close()
	f.wantExactlyTheOutbox(t, 60)
}
