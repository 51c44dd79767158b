package silo_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

type traceKey2 struct{}

// gatedLoader's OnActivate loads its state under its ctx, as a database
// call would: it reports that it runs, waits for the gate or for its ctx to
// end, and reports its ctx's error and the trace value it carries.
type gatedLoader struct {
	in    chan struct{}
	gate  chan struct{}
	saw   chan error
	trace chan any
}

func (g *gatedLoader) OnActivate(ctx context.Context, _ *grain.Context) error {
	g.in <- struct{}{}
	g.trace <- ctx.Value(traceKey2{})
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	g.saw <- ctx.Err()
	return ctx.Err()
}

func (g *gatedLoader) Receive(context.Context, *grain.Context, any) (any, error) { return "ok", nil }

func newGatedLoader() *gatedLoader {
	return &gatedLoader{in: make(chan struct{}, 1), gate: make(chan struct{}), saw: make(chan error, 1), trace: make(chan any, 1)}
}

// The activation is the grain's, not its first caller's: a first caller
// that gives up while OnActivate loads the grain's state does not fail the
// activation for the callers queued behind it. Its message is dropped as
// expired, not run for nobody; the hook saw the caller's values. (The
// hook ran under the caller's ctx: the load failed with the caller's
// cancellation, and every message waiting failed with it.)
func TestAnImpatientFirstCallerDoesNotFailTheActivation(t *testing.T) {
	g := newGatedLoader()
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "loader", func(grain.ID) *gatedLoader { return g }))
	})
	dl := s.SubscribeDeadLetters(4)
	id := grain.NewID("loader", "a")

	first, giveUp := context.WithCancel(context.WithValue(ctxT(t), traceKey2{}, "span-1"))
	firstErr := make(chan error, 1)
	go func() { _, err := s.Ask(first, id, "first"); firstErr <- err }()
	<-g.in // OnActivate runs, for the first message
	assert.Equal(t, "span-1", <-g.trace, "the hook has the first caller's values")
	second := make(chan any, 1)
	go func() {
		v, err := s.Ask(ctxT(t), id, "second")
		if err != nil {
			v = err
		}
		second <- v
	}()
	waitBacklog(t, s, 1) // the second waits for the activation
	giveUp()
	require.ErrorIs(t, <-firstErr, context.Canceled)
	close(g.gate)
	assert.NoError(t, <-g.saw, "the hook's ctx did not end with the first caller")
	assert.Equal(t, "ok", <-second)

	d := <-dl.C
	assert.Equal(t, "first", d.Msg)
	assert.Equal(t, grain.ReasonExpired, d.Reason, "the first message, whose caller had gone, was not run")
	v, err := s.Ask(ctxT(t), id, "third")
	require.NoError(t, err)
	assert.Equal(t, "ok", v)
}

// An OnActivate run for an ask still ends at the activation's give-up
// (Config.ActivationTimeout), with DeadlineExceeded, as one run for a
// tell does; the caller's message fails the activation's way.
func TestAnAskActivationsHookCtxEndsAtItsGiveUp(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := newGatedLoader()
	defer close(g.gate)
	s := newSilo(t, silo.Config{Clock: clk, ActivationTimeout: time.Minute, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "loader", func(grain.ID) *gatedLoader { return g }))
	})
	asked := make(chan error, 1)
	go func() { _, err := s.Ask(ctxT(t), grain.NewID("loader", "a"), "first"); asked <- err }()
	<-g.in
	<-g.trace
	require.NoError(t, s.Tell(ctxT(t), grain.NewID("loader", "a"), "second"))
	// The hook blocks: its partition is handed off, and the owner that
	// takes over watches the activation before it queues the tell behind it.
	waitBacklog(t, s, 1)
	clk.Advance(time.Minute + time.Second) // the deadline, and the idle tick after it
	err := <-asked
	require.ErrorIs(t, err, grain.ErrActivation)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, errors.Is(<-g.saw, context.DeadlineExceeded), "the hook's ctx ended at the give-up")
}

// callsOut is a reentrant grain that calls a peer in OnActivate and in
// each turn: each call gives up the grain's turn token, and takes it back.
type callsOut struct{}

func (callsOut) OnActivate(ctx context.Context, gc *grain.Context) error {
	_, err := silo.Call[string](ctx, gc.Silo(), grain.NewID("peer", "p"), "ping")
	return err
}

func (callsOut) Receive(ctx context.Context, gc *grain.Context, _ any) (any, error) {
	return silo.Call[string](ctx, gc.Silo(), grain.NewID("peer", "p"), "ping")
}

// A reentrant grain activated by an ask, whose OnActivate calls out, gives
// its turn token back when the activation turn ends: its later turns, which
// call out too, take it and finish. (The hook's own ctx took the token
// back and kept it: the grain's next call waited for it for ever.)
func TestAReentrantHookThatCallsOutGivesItsTokenBack(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "caller", func(grain.ID) callsOut { return callsOut{} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "peer", func(grain.ID) grain.Func {
			return func(context.Context, *grain.Context, any) (any, error) { return "pong", nil }
		}))
	})
	id := grain.NewID("caller", "a")
	for i := range 3 {
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		v, err := s.Ask(ctx, id, i)
		cancel()
		require.NoError(t, err, "turn %d", i)
		require.Equal(t, "pong", v)
	}
}

// hookCallsPeer is a reentrant grain whose OnActivate calls the peer y,
// reporting the call's error.
type hookCallsPeer struct{ hookErr chan error }

func (g hookCallsPeer) OnActivate(ctx context.Context, gc *grain.Context) error {
	_, err := silo.Call[string](ctx, gc.Silo(), grain.NewID("peer", "y"), "ping")
	g.hookErr <- err
	return nil
}

func (hookCallsPeer) Receive(context.Context, *grain.Context, any) (any, error) { return "x-ok", nil }

// A reentrant grain lets nothing in while its OnActivate runs, so a cycle
// through its hook's call is a deadlock like any other: found at once, on
// two chains. The peer's turn, which called the activating grain, fails
// with ErrCallCycle; the hook's call, queued behind that turn, is answered;
// the activation completes. (Reentrant kinds were no part of the wait-for
// graph: both calls waited for their deadlines.)
func TestACycleThroughAReentrantActivationFailsFast(t *testing.T) {
	hookErr := make(chan error, 1)
	yIn, gate := make(chan struct{}, 1), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "rhook", func(grain.ID) hookCallsPeer { return hookCallsPeer{hookErr} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "peer", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "callX" {
					yIn <- struct{}{}
					<-gate
					return silo.Call[string](ctx, gc.Silo(), grain.NewID("rhook", "x"), "from y")
				}
				return "pong", nil
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromY := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, grain.NewID("peer", "y"), "callX"); fromY <- err }()
	<-yIn // y's turn holds y
	fromX := make(chan any, 1)
	go func() {
		v, err := s.Ask(ctx, grain.NewID("rhook", "x"), "hi") // on another chain: x activates, its hook calls y
		if err != nil {
			v = err
		}
		fromX <- v
	}()
	waitBacklog(t, s, 1) // the hook's call waits behind y's turn
	close(gate)          // y calls x, which is activating: the cycle closes
	err := <-fromY
	require.ErrorIs(t, err, grain.ErrCallCycle)
	var cyc *grain.CallCycleError
	require.ErrorAs(t, err, &cyc)
	assert.Equal(t, []grain.ID{grain.NewID("peer", "y"), grain.NewID("rhook", "x"), grain.NewID("peer", "y")}, cyc.Chain)
	require.NoError(t, <-hookErr, "the hook's call was answered")
	assert.Equal(t, "x-ok", <-fromX)
}

// exitsAfterCallingOut is a reentrant grain whose first OnActivate calls a
// peer (taking its turn token back after) and then ends its goroutine with
// runtime.Goexit, as a require in a test's hook would.
type exitsAfterCallingOut struct{ first bool }

func (g *exitsAfterCallingOut) OnActivate(ctx context.Context, gc *grain.Context) error {
	if _, err := silo.Call[string](ctx, gc.Silo(), grain.NewID("peer", "p"), "ping"); err != nil {
		return err
	}
	if g.first {
		runtime.Goexit()
	}
	return nil
}

func (*exitsAfterCallingOut) Receive(ctx context.Context, gc *grain.Context, _ any) (any, error) {
	return silo.Call[string](ctx, gc.Silo(), grain.NewID("peer", "p"), "ping")
}

// An ask's activation whose hook took the turn token back and then called
// runtime.Goexit fails like a panic, and leaves nothing stuck: the fresh
// activation that follows calls out and is answered.
func TestAGoexitInAReentrantHookLeavesNothingStuck(t *testing.T) {
	var built atomic.Int32
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "exits", func(grain.ID) *exitsAfterCallingOut {
			return &exitsAfterCallingOut{first: built.Add(1) == 1}
		}, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "peer", func(grain.ID) grain.Func {
			return func(context.Context, *grain.Context, any) (any, error) { return "pong", nil }
		}))
	})
	id := grain.NewID("exits", "a")
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	_, err := s.Ask(ctx, id, "first")
	require.ErrorIs(t, err, silo.ErrGoexit)
	for i := range 3 {
		v, err := s.Ask(ctx, id, i)
		require.NoError(t, err, "turn %d", i)
		require.Equal(t, "pong", v)
	}
}
