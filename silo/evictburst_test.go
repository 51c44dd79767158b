package silo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// counted is a grain that counts the instances whose OnActivate has run
// and whose OnDeactivate has not: the activations holding their state.
type counted struct{ live, peak *atomic.Int64 }

func (c *counted) OnActivate(context.Context, *grain.Context) error {
	n := c.live.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return nil
}

func (c *counted) OnDeactivate(context.Context, *grain.Context) error {
	c.live.Add(-1)
	return nil
}

func (c *counted) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

// A burst of new grains past the activation cap, taken by the owner in one
// round, keeps the grains alive near the cap: the grains each activation
// evicts deactivate a slice at a time as the round goes, not all at its
// end. Before, 3,000 new grains behind a blocked turn were nearly all
// activated before the first of the grains they evicted had deactivated
// (a peak of 2,927 against a cap of 100; now 356).
func TestABurstOfNewGrainsStaysNearTheActivationCap(t *testing.T) {
	const limit, burst = 100, 3000
	var live, peak atomic.Int64
	s := newSilo(t, silo.Config{
		Partitions: 1, MaxActivations: limit,
		HandoffThreshold: time.Hour, // the blocked turn keeps the partition: the burst waits as one batch
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counted", func(grain.ID) *counted { return &counted{live: &live, peak: &peak} }))
		require.NoError(t, silo.Register(s, "gate", func(grain.ID) grain.Func {
			return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
				<-msg.(chan struct{})
				return nil, nil
			}
		}, silo.WithIdleTimeout(-1)))
	})
	ctx := ctxT(t)
	gate := make(chan struct{})
	require.NoError(t, s.Tell(ctx, grain.NewID("gate", "g"), gate))
	for i := range burst {
		require.NoError(t, s.Tell(ctx, grain.NewIntID("counted", int64(i)), "hi"))
	}
	close(gate)
	for range 2 { // the second in a later round: the first's round has stepped what it owed
		_, err := s.Ask(ctx, grain.NewIntID("counted", burst-1), "barrier") // among the last activated: kept
		require.NoError(t, err)
	}
	t.Logf("peak %d", peak.Load())
	assert.LessOrEqual(t, peak.Load(), int64(limit+300), "a slice past the cap at most (256 a partition)")
	assert.GreaterOrEqual(t, peak.Load(), int64(limit))
	assert.Equal(t, limit, s.Stats().Activations["counted"])
}
