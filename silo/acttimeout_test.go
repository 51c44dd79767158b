package silo_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// slowStart's first instance hangs in OnActivate until release is closed,
// ignoring its ctx or (honour) returning when its ctx ends; later
// instances start at once. It records the messages it handled.
type slowStart struct {
	instance int
	honour   bool
	in       chan<- struct{}
	release  <-chan struct{}
	cause    chan<- error
	handled  *sync.Map
}

func (g *slowStart) OnActivate(ctx context.Context, _ *grain.Context) error {
	if g.instance > 1 {
		return nil
	}
	g.in <- struct{}{}
	if g.honour {
		<-ctx.Done()
		g.cause <- context.Cause(ctx)
		return ctx.Err()
	}
	<-g.release
	return nil
}

func (g *slowStart) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	g.handled.Store(msg, g.instance)
	return g.instance, nil
}

// honourName names a subtest by how its hanging hook treats its ctx.
func honourName(honour bool) string {
	if honour {
		return "ending with its ctx"
	}
	return "ignoring its ctx"
}

// slowStartSilo starts a silo of one partition on a manual clock, with an
// ActivationTimeout of a minute and a kind "slow" whose first instance
// hangs in OnActivate (slowStart) until the test ends. in says the hook
// has begun; cause, with honour, what ended its ctx.
func slowStartSilo(t *testing.T, honour bool) (s *silo.Silo, clk *clock.Manual, in <-chan struct{}, cause <-chan error, handled *sync.Map) {
	t.Helper()
	clk = clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	began, release := make(chan struct{}, 1), make(chan struct{})
	ended := make(chan error, 1)
	handled = &sync.Map{}
	var built atomic.Int32
	s = newSilo(t, silo.Config{Clock: clk, ActivationTimeout: time.Minute, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "slow", func(grain.ID) *slowStart {
			return &slowStart{instance: int(built.Add(1)), honour: honour, in: began, release: release, cause: ended, handled: handled}
		}))
	})
	t.Cleanup(func() { close(release) }) // the first hook, which the silo gave up on, ends with the test
	return s, clk, began, ended, handled
}

// An OnActivate that overruns Config.ActivationTimeout is given up on, on
// the silo's clock (at the first idle tick past the deadline, counted from
// the handoff of its blocked turn): the messages that waited for the
// activation fail with it (dead letters, reason activation failed, the error matching
// ErrActivation and context.DeadlineExceeded), the grain leaves the
// directory, and the next message activates a fresh instance. Whatever the
// hook does later is dropped: it never runs the message it held. Without
// the bound the grain stayed activating for good, its tells waiting for
// ever and each ask until its caller's deadline.
func TestAnOverrunningOnActivateIsGivenUpOn(t *testing.T) {
	for _, honour := range []bool{false, true} {
		t.Run(honourName(honour), func(t *testing.T) {
			s, clk, in, cause, handled := slowStartSilo(t, honour)
			dl := s.SubscribeDeadLetters(16)
			ctx := ctxT(t)
			id := grain.NewID("slow", "s")

			require.NoError(t, s.Tell(ctx, id, "first")) // activates: the hook hangs
			<-in
			require.NoError(t, s.Tell(ctx, id, "second"))
			asked := make(chan error, 1)
			go func() { _, err := s.Ask(ctx, id, "third"); asked <- err }()
			waitBacklog(t, s, 2) // both wait for the activation

			clk.Advance(time.Minute + time.Second) // the deadline, and the idle tick after it
			err := <-asked
			require.ErrorIs(t, err, grain.ErrActivation)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			got := map[any]grain.Reason{}
			for range 3 {
				d := <-dl.C
				got[d.Msg] = d.Reason
			}
			assert.Equal(t, map[any]grain.Reason{
				"first": grain.ReasonActivationFailed, "second": grain.ReasonActivationFailed, "third": grain.ReasonActivationFailed,
			}, got)
			if honour {
				require.ErrorIs(t, <-cause, context.DeadlineExceeded, "the hook's ctx ended at the give-up")
			}

			v, err := silo.Call[int](ctx, s, id, "fourth") // a fresh instance
			require.NoError(t, err)
			assert.Equal(t, 2, v)
			_, ran := handled.Load("first")
			assert.False(t, ran, "the first message was a dead letter; the abandoned instance never ran it")
			assert.Zero(t, s.Stats().DeadLetters[grain.ReasonShutdown])
		})
	}
}

// An OnActivate that blocked long enough to be handed off, and then
// returned in time, is forgotten by the watch: the clock passing its
// deadline fails nothing.
func TestAnOnActivateThatReturnsInTimeIsNotGivenUpOn(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, release := make(chan struct{}, 1), make(chan struct{})
	handled := &sync.Map{}
	var built atomic.Int32
	s := newSilo(t, silo.Config{Clock: clk, ActivationTimeout: time.Minute, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "slow", func(grain.ID) *slowStart {
			return &slowStart{instance: int(built.Add(1)), in: in, release: release, handled: handled}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("slow", "s")
	asked := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, "first"); asked <- err }()
	<-in
	require.NoError(t, s.Tell(ctx, id, "second"))
	waitBacklog(t, s, 1) // handed off: watched
	close(release)
	require.NoError(t, <-asked)
	clk.Advance(2 * time.Minute)
	v, err := silo.Call[int](ctx, s, id, "second")
	require.NoError(t, err)
	assert.Equal(t, 1, v, "the same instance")
	assert.Zero(t, s.Stats().DeadLetters[grain.ReasonActivationFailed])
}

// A negative ActivationTimeout bounds nothing; the zero one is the default.
func TestActivationTimeoutConfig(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, release := make(chan struct{}, 1), make(chan struct{})
	var built atomic.Int32
	s := newSilo(t, silo.Config{Clock: clk, ActivationTimeout: -1, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "slow", func(grain.ID) *slowStart {
			return &slowStart{instance: int(built.Add(1)), in: in, release: release, handled: &sync.Map{}}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("slow", "s")
	asked := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, "first"); asked <- err }()
	<-in
	clk.Advance(24 * time.Hour)
	waited := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, "second"); waited <- err }()
	waitBacklog(t, s, 1) // still activating, a day later
	close(release)
	require.NoError(t, <-asked)
	require.NoError(t, <-waited)
}

// blockingFactory builds its grain only once released: a factory that
// blocks holds the activation as a hook would, and is bounded the same way.
func TestABlockingFactoryIsGivenUpOn(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, release := make(chan struct{}, 1), make(chan struct{})
	var built atomic.Int32
	s := newSilo(t, silo.Config{Clock: clk, ActivationTimeout: time.Minute, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "blocky", func(grain.ID) *counter {
			if built.Add(1) == 1 {
				in <- struct{}{}
				<-release
			}
			return &counter{}
		}))
	})
	t.Cleanup(func() { close(release) })
	ctx := ctxT(t)
	id := grain.NewID("blocky", "b")
	asked := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, get{}); asked <- err }()
	<-in
	require.NoError(t, s.Tell(ctx, id, incr{1}))
	waitBacklog(t, s, 1) // a new owner took the partition over, and watches the activation
	clk.Advance(time.Minute + time.Second)
	err := <-asked
	require.ErrorIs(t, err, grain.ErrActivation)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = s.Ask(ctx, id, get{}) // a fresh activation
	require.NoError(t, err)
}

// lateHook reports its ctx's error as OnActivate begins.
type lateHook struct{ began chan<- error }

func (g lateHook) OnActivate(ctx context.Context, _ *grain.Context) error {
	g.began <- ctx.Err()
	return nil
}

func (lateHook) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

// A give-up that comes while the factory still runs, before OnActivate
// has begun, skips the hook: the activation has failed, its messages are
// dead letters, and the hook would load for nothing, beside the grain's
// next activation perhaps. Until the seventy-fourth session it ran all the
// same, its ctx ended (partition.hookCtx ends it for a give-up that comes
// after it is made, and before the hook has begun).
func TestAGiveUpBeforeTheHookBeginsSkipsIt(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	building, release := make(chan struct{}, 1), make(chan struct{})
	firstBegan, began := make(chan error, 1), make(chan error, 1)
	var built atomic.Int32
	s := newSilo(t, silo.Config{Clock: clk, ActivationTimeout: time.Minute, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "late", func(grain.ID) lateHook {
			if built.Add(1) == 1 {
				building <- struct{}{}
				<-release // the first factory hangs until the test lets it go
				return lateHook{began: firstBegan}
			}
			return lateHook{began: began}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("late", "l")
	require.NoError(t, s.Tell(ctx, id, "first"))
	<-building
	asked := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, "second"); asked <- err }()
	waitBacklog(t, s, 1)
	clk.Advance(time.Minute + time.Second) // the deadline, and the idle tick after it
	require.ErrorIs(t, <-asked, context.DeadlineExceeded)

	close(release)                    // the factory returns after the give-up
	_, err := s.Ask(ctx, id, "third") // a fresh instance
	require.NoError(t, err)
	require.NoError(t, <-began)
	require.NoError(t, s.Close()) // waits for the abandoned turn too
	select {
	case err := <-firstBegan:
		t.Fatalf("the hook given up on before it began ran (its ctx: %v)", err)
	default:
	}
}

// A Shutdown gives up on an activation that hangs as a running silo does:
// at Config.ActivationTimeout the messages that waited for it are dead
// letters (reason activation failed, the ask's error matching
// ErrActivation), and the Shutdown, with nothing else to wait for,
// returns. Before, the idle ticks that look at the watched activations
// stopped as the Shutdown began: it waited out its ctx (10 s here, a
// DeadlineExceeded), and the messages were a shutdown's dead letters.
func TestAShutdownGivesUpOnAnActivationThatHangs(t *testing.T) {
	for _, honour := range []bool{false, true} {
		t.Run(honourName(honour), func(t *testing.T) {
			s, clk, in, cause, _ := slowStartSilo(t, honour)
			dl := s.SubscribeDeadLetters(16)
			ctx := ctxT(t)
			id := grain.NewID("slow", "s")
			require.NoError(t, s.Tell(ctx, id, "first")) // activates: the hook hangs
			<-in
			asked := make(chan error, 1)
			go func() { _, err := s.Ask(ctx, id, "second"); asked <- err }()
			waitBacklog(t, s, 1) // handed off: watched

			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- s.Shutdown(sctx) }()
			require.Eventually(t, func() bool { // the Shutdown has begun
				return errors.Is(s.Tell(ctx, id, "late"), grain.ErrSiloClosed)
			}, 10*time.Second, time.Millisecond)
			clk.Advance(time.Minute + time.Second) // the deadline, and the idle tick after it

			err := <-asked
			require.ErrorIs(t, err, grain.ErrActivation)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, <-shut)
			got := map[any]grain.Reason{}
			for range 2 {
				d := <-dl.C
				got[d.Msg] = d.Reason
			}
			assert.Equal(t, map[any]grain.Reason{"first": grain.ReasonActivationFailed, "second": grain.ReasonActivationFailed}, got)
			if honour {
				require.ErrorIs(t, <-cause, context.DeadlineExceeded, "the hook's ctx ended at the give-up")
			}
		})
	}
}

// timerAtStart's OnActivate waits for its ctx to end, then starts a timer
// and reports StartTimer's error.
type timerAtStart struct {
	in      chan<- struct{}
	started chan<- error
}

func (g timerAtStart) OnActivate(ctx context.Context, gc *grain.Context) error {
	g.in <- struct{}{}
	<-ctx.Done()
	g.started <- gc.StartTimer("save", time.Second, 0, "tick")
	return ctx.Err()
}

func (timerAtStart) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

// An OnActivate the silo gave up on — past Config.ActivationTimeout, or
// running on as the silo closes — is told so if it starts a timer: the
// timer would never fire (its activation failed, or its silo stopped), and
// StartTimer said nil before.
func TestATimerStartedByAnOnActivateGivenUpOnIsRefused(t *testing.T) {
	for _, end := range []string{"timeout", "close"} {
		t.Run(end, func(t *testing.T) {
			clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			in, started := make(chan struct{}, 1), make(chan error, 1)
			s := newSilo(t, silo.Config{Clock: clk, ActivationTimeout: time.Minute, Partitions: 1}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "timerAtStart", func(grain.ID) timerAtStart {
					return timerAtStart{in: in, started: started}
				}))
			})
			ctx := ctxT(t)
			id := grain.NewID("timerAtStart", "t")
			require.NoError(t, s.Tell(ctx, id, "first")) // activates: the hook waits for its ctx
			<-in
			require.NoError(t, s.Tell(ctx, id, "second"))
			waitBacklog(t, s, 1) // handed off: watched

			if end == "timeout" {
				clk.Advance(time.Minute + time.Second) // the deadline, and the idle tick after it
				err := <-started
				require.ErrorIs(t, err, grain.ErrActivation)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				return
			}
			require.NoError(t, s.Close())
			require.ErrorIs(t, <-started, grain.ErrSiloClosed)
		})
	}
}

// With the real clock and no IdleQuantum set, the idle wheel's tick
// follows a short Config.ActivationTimeout too — the give-up is checked at
// the ticks — so an OnActivate that overruns 80 ms is given up on near
// then, and its ctx ends then: in a synctest bubble, exactly. The tick
// followed the idle timeouts alone: at the default 1 s tick, a hook bound
// to 80 ms ran on, its ctx live, for up to a second (a scratch program's
// 300 ms load was never given up on).
func TestIdleQuantumFollowsAShortActivationTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hooks, gate := make(chan context.Context, 1), make(chan struct{})
		s := ctxKeeperSilo(t, silo.Config{ActivationTimeout: 80 * time.Millisecond}, ctxKeeper{hook: hooks, gate: gate})
		defer close(gate)
		start := time.Now()
		asked := make(chan error, 1)
		go func() { _, err := s.Ask(t.Context(), grain.NewID("keep", "k"), "hi"); asked <- err }()
		hctx := <-hooks
		require.ErrorIs(t, <-asked, grain.ErrActivation)
		took := time.Since(start)
		require.ErrorIs(t, hctx.Err(), context.DeadlineExceeded)
		assert.GreaterOrEqual(t, took, 80*time.Millisecond, "not before its bound")
		// The bound from the activation turn's handoff (5 ms), then a tick
		// of 10 ms, an eighth of it: within two ticks past that.
		assert.LessOrEqual(t, took, 110*time.Millisecond)
	})
}
