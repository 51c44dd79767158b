package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// napper records its deactivation.
type napper struct{ gone chan<- grain.ID }

func (n *napper) Receive(context.Context, *grain.Context, any) (any, error) { return "ok", nil }

func (n *napper) OnDeactivate(_ context.Context, gc *grain.Context) error {
	n.gone <- gc.ID()
	return nil
}

// The idle ticks stop while no partition has a grain that can go idle —
// none active, or all of a kind that never idles — and start again with
// the first one, in their old phase: an idle silo does not wake each
// partition once a quantum, and idle deactivation still works after.
func TestIdleTicksSleepWhileNothingCanGoIdle(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gone := make(chan grain.ID, 8)
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "nap", func(grain.ID) *napper { return &napper{gone: gone} },
			silo.WithIdleTimeout(8*time.Second))) // a quantum of 1 s
		require.NoError(t, silo.Register(s, "forever", func(grain.ID) *counter { return &counter{} },
			silo.WithIdleTimeout(-1)))
	})
	ctx := ctxT(t)
	asleep := func() bool { // tick, and see whether another is scheduled
		clk.Advance(time.Second)
		return clk.Pending() == 0
	}

	for i := range 4 { // grains that never idle
		_, err := s.Ask(ctx, grain.NewIntID("forever", int64(i)), get{})
		require.NoError(t, err)
	}
	require.Equal(t, 1, clk.Pending(), "ticking after Start")
	// The ticks give back the queues' spare segments the asks left, then
	// find nothing to do, and stop.
	require.Eventually(t, asleep, 10*time.Second, time.Millisecond)
	clk.Advance(time.Hour)
	require.Zero(t, clk.Pending(), "no idle tick scheduled while nothing can go idle")

	// A grain that can go idle wakes the ticks before its ask is answered.
	nap := grain.NewID("nap", "a")
	_, err := s.Ask(ctx, nap, get{})
	require.NoError(t, err)
	require.Equal(t, 1, clk.Pending(), "woken by the activation")
	clk.Advance(7 * time.Second)
	select {
	case id := <-gone:
		t.Fatalf("%v deactivated before its idle timeout", id)
	default:
	}
	clk.Advance(2 * time.Second) // past its 8 s deadline, rounded up to the quantum
	require.Equal(t, nap, <-gone)

	require.Eventually(t, asleep, 10*time.Second, time.Millisecond, "asleep again once it is gone")
	require.Equal(t, 4, s.Stats().Activations["forever"], "the grains that never idle are still there")
}
