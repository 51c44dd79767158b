package silo_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// glance is a message the glancer kind lets in while one of its turns waits;
// its turn waits in silo.Await until gate is closed (nil: not at all),
// saying so on waiting.
type glance struct {
	name    string
	gate    chan struct{}
	waiting chan struct{}
}

// glancer notes each message it handles (and says so on seen, if set).
type glancer struct {
	mu   *sync.Mutex
	log  *[]string
	seen chan<- string
}

func (g *glancer) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	name, _ := msg.(string)
	p, isGlance := msg.(glance)
	if isGlance {
		name = p.name
	}
	g.mu.Lock()
	*g.log = append(*g.log, name)
	g.mu.Unlock()
	if g.seen != nil {
		g.seen <- name
	}
	if isGlance && p.gate != nil {
		return nil, silo.Await(ctx, func() error { close(p.waiting); <-p.gate; return nil })
	}
	return nil, nil
}

// One turn at a time holds a WithMayInterleave grain's other messages:
// the one that began with no turn under way — p1 here — or, once it has
// ended, the first message the predicate does not take, let in beside the
// turns it let in, which hold nothing (holding.go). The write sent while
// p1 waited begins as p1 ends, though p2, let in beside p1, still waits;
// so does the next, the first over. (Before, the write waited until no turn
// was under way: a stream of let-in turns, each waiting, held it as long.)
func TestOneTurnAtATimeHoldsAMayInterleaveGrain(t *testing.T) {
	var mu sync.Mutex
	var log []string
	logged := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), log...) }
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "glancer", func(grain.ID) *glancer { return &glancer{mu: &mu, log: &log} },
			silo.WithMayInterleave(func(msg any) bool { _, ok := msg.(glance); return ok })))
	})
	ctx, id := ctxT(t), grain.NewID("glancer", "k")
	ask := func(p glance) <-chan error {
		done := make(chan error, 1)
		go func() { _, err := s.Ask(ctx, id, p); done <- err }()
		return done
	}
	p1 := glance{name: "p1", gate: make(chan struct{}), waiting: make(chan struct{})}
	p2 := glance{name: "p2", gate: make(chan struct{}), waiting: make(chan struct{})}
	first := ask(p1)
	<-p1.waiting
	require.NoError(t, s.Tell(ctx, id, "write")) // to the mailbox: p1's turn is under way
	second := ask(p2)                            // let in: p1 waits
	<-p2.waiting
	close(p1.gate)
	require.NoError(t, <-first)
	_, err := s.Ask(ctx, id, "write2") // goes in beside p2 too, the write over
	require.NoError(t, err)
	assert.Equal(t, []string{"p1", "p2", "write", "write2"}, logged(), "the writes go in beside p2, which still waits")

	close(p2.gate)
	require.NoError(t, <-second)
	_, err = s.Ask(ctx, id, "last")
	require.NoError(t, err)
	assert.Equal(t, []string{"p1", "p2", "write", "write2", "last"}, logged())
}

// What waits at a WithMayInterleave grain waits for the turn that holds it
// alone, and the deadlock walk reads it so: x's turn asks g for a write,
// behind g's holding turn, which waits on a gated grain; a turn g let in
// beside it asks x, behind x's turn. That is no cycle — once the holder
// ends, the write goes in beside the let-in turn — and every ask is
// answered. (Read as waiting for every turn of g, the write closed a cycle
// through the let-in turn, and the walk failed the let-in turn's ask with
// ErrCallCycle.)
func TestAnAskBehindAHolderWaitsForItAlone(t *testing.T) {
	in, gate := make(chan struct{}, 1), make(chan struct{})
	xIn := make(chan struct{}, 1)
	g, x, gd := grain.NewID("mi", "g"), grain.NewID("plainx", "x"), grain.NewID("gated", "gd")
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "gated", func(grain.ID) gated { return gated{in: in, gate: gate} }))
		require.NoError(t, silo.Register(s, "mi", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch msg {
				case "work":
					return silo.Call[string](ctx, s, gd, "x")
				case glance{name: "ask x"}:
					return silo.Call[string](ctx, s, x, "hi")
				}
				return "g-ok", nil
			}
		}, silo.WithMayInterleave(func(msg any) bool { _, ok := msg.(glance); return ok })))
		require.NoError(t, silo.Register(s, "plainx", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "go" {
					xIn <- struct{}{}
					return silo.Call[string](ctx, s, g, "write")
				}
				return "x-ok", nil
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	worked := askAsync(ctx, s, g, "work")
	<-in // g's holder waits on the gated grain
	fromX := askAsync(ctx, s, x, "go")
	<-xIn
	waitBacklog(t, s, 1) // x's write waits behind g's holder
	peeked := askAsync(ctx, s, g, glance{name: "ask x"})
	waitBacklog(t, s, 2) // the let-in turn's ask waits behind x's turn: the walk ran, and found no cycle
	close(gate)
	for name, c := range map[string]<-chan error{"work": worked, "x": fromX, "the let-in turn": peeked} {
		require.NoError(t, <-c, name)
	}
	assert.Zero(t, s.Stats().DeadLetters[grain.ReasonDeadlock])
}

// A message that would hold the grain but whose caller has gone is dropped
// as it is let in, and the hold passes to the next: p1 holds the grain, an
// ask whose caller then gives up and a write wait behind it, and p2 is let
// in beside it. As p1 ends, the ask goes as a dead letter (expired) and
// the write goes in beside p2, which still waits. (The write stayed in the
// mailbox, no turn holding the grain, until p2 ended: in a storm, for
// good.)
func TestAHoldPassesOverAnAskWhoseCallerHasGone(t *testing.T) {
	var mu sync.Mutex
	var log []string
	seen := make(chan string, 16)
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "glancer", func(grain.ID) *glancer { return &glancer{mu: &mu, log: &log, seen: seen} },
			silo.WithMayInterleave(func(msg any) bool { _, ok := msg.(glance); return ok })))
	})
	ctx, id := ctxT(t), grain.NewID("glancer", "k")
	ask := func(p glance) <-chan error { return askAsync(ctx, s, id, p) }
	p1 := glance{name: "p1", gate: make(chan struct{}), waiting: make(chan struct{})}
	p2 := glance{name: "p2", gate: make(chan struct{}), waiting: make(chan struct{})}
	first := ask(p1)
	<-p1.waiting
	gone, leave := context.WithCancel(ctx)
	left := askAsync(gone, s, id, "gone")
	waitBacklog(t, s, 1) // behind p1
	leave()
	require.ErrorIs(t, <-left, context.Canceled)
	require.NoError(t, s.Tell(ctx, id, "write"))
	second := ask(p2)
	<-p2.waiting
	require.Equal(t, "p1", <-seen)
	require.Equal(t, "p2", <-seen)
	close(p1.gate)
	require.NoError(t, <-first)
	select { // nothing else is sent the grain: the write goes in as p1 ends, or not at all while p2 waits
	case name := <-seen:
		require.Equal(t, "write", name)
	case <-time.After(10 * time.Second):
		t.Fatal("the write did not go in beside p2")
	}
	assert.Equal(t, uint64(1), s.Stats().DeadLetters[grain.ReasonExpired])
	close(p2.gate)
	require.NoError(t, <-second)
}

// A cycle across call chains through a turn let in to hold the grain fails
// fast: p1 holds g, a write waits behind it, and p2 is let in beside it;
// x's turn, for another caller, waits. As p1 ends the write goes in,
// holding g, and calls x, behind x's turn; x's turn then calls g with a
// message the predicate does not take — behind the write, which waits for
// x. The walk reads g's holder, the write's turn (which says so as it
// begins, execute), and fails x's call at once.
func TestACycleThroughALetInHolderFailsFast(t *testing.T) {
	var mu sync.Mutex
	var log []string
	xGate, xIn := make(chan struct{}), make(chan struct{}, 1)
	g, x := grain.NewID("glancer", "g"), grain.NewID("backx", "x")
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "glancer", func(grain.ID) grain.Func {
			inner := &glancer{mu: &mu, log: &log}
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				if msg == "write" {
					return silo.Call[string](ctx, s, x, "back")
				}
				return inner.Receive(ctx, c, msg)
			}
		}, silo.WithMayInterleave(func(msg any) bool { _, ok := msg.(glance); return ok })))
		require.NoError(t, silo.Register(s, "backx", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "back" {
					return "x-ok", nil
				}
				xIn <- struct{}{}
				if err := silo.Await(ctx, func() error { <-xGate; return nil }); err != nil {
					return nil, err
				}
				return silo.Call[string](ctx, s, g, "q")
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	p1 := glance{name: "p1", gate: make(chan struct{}), waiting: make(chan struct{})}
	p2 := glance{name: "p2", gate: make(chan struct{}), waiting: make(chan struct{})}
	first := askAsync(ctx, s, g, p1)
	<-p1.waiting
	wrote := askAsync(ctx, s, g, "write")
	waitBacklog(t, s, 1) // behind p1
	second := askAsync(ctx, s, g, p2)
	<-p2.waiting
	fromX := askAsync(ctx, s, x, "go")
	<-xIn
	close(p1.gate)
	require.NoError(t, <-first)
	waitBacklog(t, s, 1) // the write, let in, calls x: behind x's turn
	close(xGate)
	err := <-fromX
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, grain.ErrCallCycle)
	require.NoError(t, <-wrote, "x's turn over, the write's call is answered")
	close(p2.gate)
	require.NoError(t, <-second)
}

// A message the predicate does not take goes in to hold the grain past the
// bound on its interleaved turns (its backlog limit): r's holder has ended,
// and two turns it let in — one past the bound, an ask from c's turn — wait
// on b, whose turn waits to ask r. Held back for room, b's ask waited for
// turns that waited for b: a deadlock the walk, reading r's holder alone,
// did not see (bench/chaos -backlog 3, every ask to its deadline).
func TestAnAskGoesInToHoldAMayInterleaveGrainPastItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := silo.New(silo.Config{Partitions: 1})
		require.NoError(t, err)
		gate, gate2 := make(chan struct{}), make(chan struct{})
		b := grain.NewID("b", "b")
		require.NoError(t, silo.Register(s, "r", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch msg {
				case glance{name: "gate2"}:
					return "ok", silo.Await(ctx, func() error { <-gate2; return nil })
				case glance{name: "wait"}:
					return silo.Call[string](ctx, s, b, "work")
				}
				return "ok", nil
			}
		}, silo.WithMayInterleave(func(msg any) bool { _, ok := msg.(glance); return ok }), silo.WithMaxBacklog(1, silo.RejectNewest)))
		require.NoError(t, silo.Register(s, "c", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				return silo.Call[string](ctx, s, grain.NewID("r", "r"), glance{name: "wait"})
			}
		}))
		registerAsksBack(t, s, gate) // b's "start" waits for gate, then asks r "q"
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		r := grain.NewID("r", "r")
		bDone := askAsync(ctx, s, b, "start")
		synctest.Wait()                                      // b's turn waits for gate
		holder := askAsync(ctx, s, r, glance{name: "gate2"}) // r idle: it holds r
		synctest.Wait()
		let := askAsync(ctx, s, r, glance{name: "wait"}) // let in: r's bound
		synctest.Wait()
		past := askAsync(ctx, s, grain.NewID("c", "c"), "go") // c's turn's ask: past the bound
		synctest.Wait()
		close(gate2)
		require.NoError(t, <-holder) // r's holder over; two turns it let in wait on b
		start := time.Now()
		close(gate) // b asks r "q"
		for name, c := range map[string]<-chan error{"b": bDone, "let in": let, "past the bound": past} {
			require.NoError(t, <-c, name)
		}
		assert.Zero(t, time.Since(start), "an ask waited for its deadline")
	})
}
