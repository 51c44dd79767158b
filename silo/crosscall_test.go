package silo_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

// A turn that calls a grain of another partition yields once before it
// hands its partition off; the callee's owner, on another core, usually
// answers in that moment, and the turn goes on without a handoff. A call to a grain of its
// own partition always hands off (the callee cannot run before it does).
func TestACallToAnotherPartitionUsuallyNeedsNoHandoff(t *testing.T) {
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
	n := calls(other)
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skipf("one P: the callee's owner has no core of its own to answer on (%d handoffs in 100 calls)", n)
	}
	require.Less(t, n, uint64(50), "a call across partitions is mostly answered while its turn yields")
}
