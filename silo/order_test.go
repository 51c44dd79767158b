package silo_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// orderMsg is the n-th tell of sender from to one grain.
type orderMsg struct {
	from, n int
	slow    bool // a turn long enough to be handed off
	crash   bool
}

// seqBook is where every activation of a grain writes what it saw, so
// that order is checked across deactivations, evictions and restarts.
type seqBook struct {
	last      [][]atomic.Int64 // [grain][sender]: the last n seen
	outOfOrd  atomic.Int64
	delivered atomic.Int64
}

type seqGrain struct {
	book *seqBook
	idx  int
}

func (g *seqGrain) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	m, ok := msg.(orderMsg)
	if !ok {
		return nil, nil // the chaos goroutine's ping
	}
	g.book.delivered.Add(1)
	if prev := g.book.last[g.idx][m.from].Swap(int64(m.n)); int64(m.n) <= prev {
		g.book.outOfOrd.Add(1)
	}
	if m.slow {
		busyWork(2 * time.Millisecond)
	}
	if m.crash {
		panic("order: crash")
	}
	return nil, nil
}

// Each sender's tells to a grain run in the order sent, whatever happens
// between them: the grain deactivated (asked to, or evicted by the cap),
// restarted after a panic, or handed to another goroutine by a slow turn —
// the messages waiting go to the next instance or activation in order.
func TestPerSenderOrderUnderChaos(t *testing.T) {
	const (
		senders = 4
		grains  = 24
		perSend = 3000
	)
	book := &seqBook{last: make([][]atomic.Int64, grains)}
	for i := range book.last {
		book.last[i] = make([]atomic.Int64, senders+1) // and the barrier's
	}
	s := newSilo(t, silo.Config{
		Partitions: 3, MaxActivations: 12, HandoffThreshold: silo.MinHandoffThreshold,
		// Restarts without limit and without backoff: a stop would
		// dead-letter what waits, and the test is about order.
		Supervision: activation.Supervision{MaxRestarts: 1 << 30, Window: time.Nanosecond, MinBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond},
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "o", func(id grain.ID) *seqGrain {
			k, _ := id.IntKey()
			return &seqGrain{book: book, idx: int(k)}
		}))
	})
	dead := s.SubscribeDeadLetters(1024)
	defer dead.Cancel()
	ctx := ctxT(t)
	var chaos sync.WaitGroup
	chaos.Go(func() { // deactivations racing the tells, of grains surely active
		r := rand.New(rand.NewPCG(1, 2))
		for range 100 {
			id := grain.NewIntID("o", int64(r.IntN(grains)))
			_, err := s.Ask(ctx, id, "ping")
			assert.NoError(t, err) // not require: this is not the test's goroutine
			assert.NoError(t, s.Deactivate(ctx, id))
		}
	})
	var wg sync.WaitGroup
	sent := make([][]int, senders) // [sender][grain]: how many told
	for p := range senders {
		sent[p] = make([]int, grains)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 5))
			for range perSend {
				g := r.IntN(grains)
				sent[p][g]++
				m := orderMsg{from: p, n: sent[p][g], slow: r.IntN(500) == 0, crash: r.IntN(50) == 0}
				assert.NoError(t, s.Tell(ctx, grain.NewIntID("o", int64(g)), m))
			}
		})
	}
	wg.Wait()
	chaos.Wait()
	for g := range grains { // a barrier per grain: everything told has run
		_, err := s.Ask(ctx, grain.NewIntID("o", int64(g)), orderMsg{from: senders, n: 1})
		require.NoError(t, err)
	}
	assert.Zero(t, book.outOfOrd.Load(), "a sender's tells ran out of order")
	for p := range senders {
		for g := range grains {
			if sent[p][g] > 0 {
				assert.Equal(t, int64(sent[p][g]), book.last[g][p].Load(), "sender %d, grain %d: the last one ran last", p, g)
			}
		}
	}
	assert.Equal(t, int64(senders*perSend+grains), book.delivered.Load(), "every tell ran once")
	select {
	case d := <-dead.C:
		t.Fatalf("a dead letter: %+v", d)
	default:
	}
	st := s.Stats()
	t.Logf("restarts %d, handoffs %d, deactivations %v", st.Restarts, st.Handoffs, st.Deactivations)
	assert.Positive(t, st.Restarts)
	assert.Positive(t, st.Deactivations[grain.DeactivationEvicted])
	assert.Positive(t, st.Deactivations[grain.DeactivationRequested])
}

// noteN is the n-th message a relay grain sent its sink.
type noteN struct{ n int64 }

// orderSink checks that each relay's notes come in the order sent.
type orderSink struct {
	last  int64
	bad   *atomic.Int64
	noted chan<- struct{} // told of each note
}

func (g *orderSink) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if m, ok := msg.(noteN); ok {
		if m.n <= g.last {
			g.bad.Add(1)
		}
		g.last = m.n
		g.noted <- struct{}{}
	}
	return nil, nil
}

// noteSender sends its sink a note each turn, asking and telling by turns: a
// turn that asks lets the next one in (the kind is reentrant), which
// tells.
type noteSender struct{ n int64 }

func (g *noteSender) Receive(ctx context.Context, c *grain.Context, _ any) (any, error) {
	g.n++
	k, _ := c.ID().IntKey()
	to := grain.NewIntID("sink", k)
	if g.n%2 == 0 {
		return c.Silo().Ask(ctx, to, noteN{g.n})
	}
	return nil, c.Silo().Tell(ctx, to, noteN{g.n})
}

// A grain's own sends keep their order when its turns interleave: a turn
// let in while another waits on a call runs only once that call's request
// is queued, so what it sends the same grain comes after the request. The
// waiting turn gave its turn token up before its request was queued, and
// the turn let in could send first: 48–593 of this test's 40,000 notes
// out of order, in ten runs of ten (found by
// TestSeveralClientsAtOnceKeepEveryPromise); now none. (An ordinary
// turn's call, which takes the token only for that while, races far less:
// without that part of the fix, three runs of twenty fail.)
func TestAnInterleavedTurnsSendsFollowTheCallThatLetItIn(t *testing.T) {
	var bad atomic.Int64
	const notes = 40_000 // one a relay's turn
	noted := make(chan struct{}, notes)
	s := newSilo(t, silo.Config{Partitions: 4}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "sink", func(grain.ID) *orderSink { return &orderSink{bad: &bad, noted: noted} }))
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) *noteSender { return &noteSender{} }, silo.WithReentrant()))
	})
	ctx := ctxT(t)
	const relays = 16
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := range notes / 4 {
				assert.NoError(t, s.Tell(ctx, grain.NewIntID("relay", int64((i+p)%relays)), struct{}{}))
			}
		})
	}
	wg.Wait()
	for range notes { // every note in
		select {
		case <-noted:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	assert.Zero(t, bad.Load(), "a relay's notes out of order")
}
