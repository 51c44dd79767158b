package silo_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Durations a program means as "practically never" — an idle timeout, a
// DelayDeactivation, a quarantine of the largest Duration — mean just that.
// Added to the silo clock's offset they overflowed into the past: the grain
// went at the next idle tick, or its quarantine ended at once.
func TestTheLargestDurationsMeanNever(t *testing.T) {
	forever := time.Duration(math.MaxInt64)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var built atomic.Int32
	s := newSilo(t, silo.Config{Clock: clk, IdleQuantum: time.Second, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "long", func(grain.ID) *counter { built.Add(1); return &counter{} },
			silo.WithIdleTimeout(forever)))
		require.NoError(t, silo.Register(s, "kept", func(grain.ID) grain.Func {
			built.Add(1)
			return func(_ context.Context, c *grain.Context, msg any) (any, error) {
				c.DelayDeactivation(forever)
				return nil, nil
			}
		}, silo.WithIdleTimeout(2*time.Second)))
		require.NoError(t, silo.Register(s, "probe", func(grain.ID) *counter { return &counter{} },
			silo.WithIdleTimeout(-1)))
		require.NoError(t, silo.Register(s, "bad", func(grain.ID) grain.Func {
			return func(context.Context, *grain.Context, any) (any, error) { panic("bad") }
		}, silo.WithSupervision(activation.Supervision{MaxRestarts: -1, Quarantine: forever})))
	})
	ctx := ctxT(t)
	clk.Advance(time.Second) // the silo clock's offset is past zero: what is added to it can overflow
	for _, k := range []string{"long", "kept"} {
		_, err := s.Ask(ctx, grain.NewID(k, "a"), get{})
		require.NoError(t, err)
	}
	_, err := s.Ask(ctx, grain.NewID("bad", "a"), get{}) // stopped at once, and quarantined
	require.ErrorIs(t, err, grain.ErrPanic)

	for range 10 {
		clk.Advance(time.Second)
		_, err := s.Ask(ctx, grain.NewID("probe", "p"), get{}) // a barrier: the tick was handled
		require.NoError(t, err)
	}
	_, err = s.Ask(ctx, grain.NewID("bad", "a"), get{})
	require.ErrorIs(t, err, grain.ErrGrainStopped, "still quarantined")
	st := s.Stats()
	require.Equal(t, 1, st.Activations["long"], "not gone at the idle ticks")
	require.Equal(t, 1, st.Activations["kept"], "kept")
	require.EqualValues(t, 2, built.Load(), "never deactivated and built again")
}

// The largest Duration as DeactivationTimeout means an OnDeactivate is never
// given up on. The give-up's timer, at the timeout plus the handoff
// threshold, overflowed into the past: every hook was given up on at once.
func TestTheLargestDeactivationTimeoutNeverGivesUp(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, release := make(chan struct{}, 1), make(chan struct{})
	out := make(chan error, 1)
	var logs syncBuffer
	s := newSilo(t, silo.Config{Clock: clk, DeactivationTimeout: math.MaxInt64, Logger: newTextLogger(&logs)},
		func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "hook", func(grain.ID) gatedHook { return gatedHook{in: in, release: release, out: out} }))
		})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let) // before the silo's Close, which waits for the hook
	ctx := ctxT(t)
	id := grain.NewID("hook", "h")
	_, err := s.Ask(ctx, id, "hi")
	require.NoError(t, err)
	require.NoError(t, s.Deactivate(ctx, id))
	<-in                     // OnDeactivate runs
	clk.Advance(time.Minute) // the overflowed timer fired at the first advance
	waited := make(chan any, 1)
	go func() { v, _ := s.Ask(ctx, id, "again"); waited <- v }()
	waitBacklog(t, s, 1) // the ask waits for the deactivation: not given up on
	let()
	require.NoError(t, <-out)
	assert.Equal(t, "ok", <-waited, "a fresh activation answered")
	s.WaitLogged()
	assert.NotContains(t, logs.String(), "overran")
}

// gatedHook's OnDeactivate waits for release, ignoring its ctx.
type gatedHook struct {
	in, release chan struct{}
	out         chan<- error
}

func (h gatedHook) Receive(context.Context, *grain.Context, any) (any, error) { return "ok", nil }

func (h gatedHook) OnDeactivate(ctx context.Context, _ *grain.Context) error {
	h.in <- struct{}{}
	<-h.release
	h.out <- nil
	return nil
}

// The largest caps are no cap: MaxActivations split over the partitions
// overflowed into a negative share (no cap), or, with one partition, sized
// the LRU past the largest int, and New failed with golang-lru's own error.
func TestTheLargestActivationCapsWork(t *testing.T) {
	for _, cfg := range []silo.Config{
		{MaxActivations: math.MaxInt},
		{MaxActivations: math.MaxInt, Partitions: 1},
		{MaxActivations: math.MaxInt / 2, Partitions: 1},
	} {
		s := newSilo(t, cfg, nil)
		for i := range 10 {
			_, err := silo.Call[int](ctxT(t), s, grain.NewIntID("counter", int64(i)), get{})
			require.NoError(t, err)
		}
		require.Equal(t, 10, s.Stats().Activations["counter"])
	}
}
