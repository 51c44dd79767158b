package silo_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

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
