package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

// A call to a grain of its own partition always hands the partition off
// (the callee cannot run before it does); a call to another partition's
// yields once first, and the callee's owner, on another core, usually
// answers in that moment — how often is a matter of scheduling, measured by
// BenchmarkNestedCallPartitions (handoffs/op: 1 within, about 0.01 across),
// not asserted here, where other tests share the cores (it failed with
// three test binaries on two cores: 74 handoffs in 100 calls).
func TestACallWithinItsPartitionHandsOff(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				return c.Silo().Ask(ctx, msg.(grain.ID), get{})
			}
		}))
	})
	ctx := ctxT(t)
	pt, err := queues.NewPartitioner(2)
	require.NoError(t, err)
	callee := grain.NewID("counter", "c")
	var same, other grain.ID
	for i := 0; same.IsZero() || other.IsZero(); i++ {
		id := grain.NewIntID("relay", int64(i))
		if pt.Partition(id) == pt.Partition(callee) {
			same = id
		} else {
			other = id
		}
	}
	calls := func(relay grain.ID) uint64 {
		before := s.Stats().Handoffs
		for range 100 {
			_, err := s.Ask(ctx, relay, callee)
			require.NoError(t, err)
		}
		return s.Stats().Handoffs - before
	}
	require.GreaterOrEqual(t, calls(same), uint64(100), "a call within the partition hands off every time")
	_ = calls(other) // runs, and answers: the yield before the handoff loses no call
}
