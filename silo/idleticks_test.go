package silo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
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
	const parts = 2
	gone := make(chan grain.ID, 8)
	s := newSilo(t, silo.Config{Clock: clk, Partitions: parts}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "nap", func(grain.ID) *napper { return &napper{gone: gone} },
			silo.WithIdleTimeout(8*time.Second))) // a quantum of 1 s
		require.NoError(t, silo.Register(s, "forever", func(grain.ID) *counter { return &counter{} },
			silo.WithIdleTimeout(-1)))
	})
	ctx := ctxT(t)

	// One grain that never idles on each partition: asking it after the
	// clock moved is a barrier — its partition has handled the idle tick,
	// which went ahead in the control lane.
	pt, err := queues.NewPartitioner(parts)
	require.NoError(t, err)
	var probes []grain.ID
	for i := 0; len(probes) < parts; i++ {
		id := grain.NewID("forever", fmt.Sprint(i))
		if pt.Partition(id) == len(probes) {
			probes = append(probes, id)
		}
	}
	barrier := func() {
		t.Helper()
		for _, id := range probes {
			_, err := s.Ask(ctx, id, get{})
			require.NoError(t, err)
		}
	}
	tick := func() {
		t.Helper()
		clk.Advance(time.Second)
		barrier()
	}

	barrier()
	require.Equal(t, 1, clk.Pending(), "ticking after Start")
	tick() // the partitions find nothing for the ticks...
	tick() // ...and the ticker, seeing that, stops
	require.Zero(t, clk.Pending(), "no idle tick scheduled while nothing can go idle")
	clk.Advance(time.Hour)
	require.Zero(t, clk.Pending())

	// A grain that can go idle wakes the ticks before its ask is answered.
	nap := grain.NewID("nap", "a")
	_, err = s.Ask(ctx, nap, get{})
	require.NoError(t, err)
	require.Equal(t, 1, clk.Pending(), "woken by the activation")
	for range 8 {
		select {
		case id := <-gone:
			t.Fatalf("%v deactivated before its idle timeout", id)
		default:
		}
		tick()
	}
	tick() // its deadline, rounded up to the quantum, has passed
	require.Equal(t, nap, <-gone)

	tick() // the partition has nothing left...
	tick() // ...and the ticks stop again
	require.Zero(t, clk.Pending())
	require.Equal(t, 2, s.Stats().Activations["forever"], "the grains that never idle are still there")
}
