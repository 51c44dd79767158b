package silo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A full partition queue makes senders wait for room, bounded by their ctx.
func TestFullQueueMakesSendersWait(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1, QueueCapacity: 2, HandoffThreshold: time.Hour}, nil)
	ctx := ctxT(t)
	gate := make(chan struct{})
	id := grain.NewID("counter", "a")
	_, err := silo.Call[int](ctx, s, id, incr{0}) // active
	require.NoError(t, err)
	require.NoError(t, s.Tell(ctx, id, hold{gate})) // the owner is busy, and no handoff
	require.Eventually(t, func() bool { return s.Stats().QueueDepth[0] == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Tell(ctx, id, incr{1}))
	require.NoError(t, s.Tell(ctx, id, incr{1})) // the queue is full now

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = s.Tell(short, id, incr{100})
	require.ErrorIs(t, err, grain.ErrOverloaded)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	waited := make(chan error, 1)
	go func() { waited <- s.Tell(ctx, id, incr{1}) }()
	close(gate)
	require.NoError(t, <-waited, "the sender got in once the queue drained")
	n, err := silo.Call[int](ctx, s, id, get{})
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the refused message was not queued")
}

// fanout tells n messages to grains of its own partition.
type fanout struct{}

func (f *fanout) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	for i := range msg.(int) {
		if err := c.Silo().Tell(ctx, grain.NewID("counter", fmt.Sprint(i%3)), incr{1}); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// A turn that fills its own partition's queue hands the partition off while
// it waits, so the queue drains and the turn finishes.
func TestTurnFillingItsOwnPartitionDoesNotDeadlock(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1, QueueCapacity: 4}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
		require.NoError(t, silo.Register(s, "fanout", func(grain.ID) *fanout { return &fanout{} }))
	})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("fanout", "f"), 300)
	require.NoError(t, err)
	total := 0
	for i := range 3 {
		n, err := silo.Call[int](ctx, s, grain.NewID("counter", fmt.Sprint(i)), get{})
		require.NoError(t, err)
		total += n
	}
	assert.Equal(t, 300, total)
}
