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

	assert.EqualValues(t, 1, s.Stats().QueueWaits, "the send that waited, and gave up")

	waited := make(chan error, 1)
	go func() { waited <- s.Tell(ctx, id, incr{1}) }()
	close(gate)
	require.NoError(t, <-waited, "the sender got in once the queue drained")
	assert.LessOrEqual(t, s.Stats().QueueWaits, uint64(2), "it waited once at most (the drain may have come first)")
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

// Senders waiting for room in a full queue when the silo stops are let go:
// a Close fails them at once with ErrSiloClosed, and a Shutdown, which stops
// taking messages from outside as it begins, does too — none waits out its
// ctx, and none of their messages is queued behind the stop.
func TestSendersWaitingForRoomAreReleasedByTheStop(t *testing.T) {
	for _, stop := range []string{"Close", "Shutdown"} {
		t.Run(stop, func(t *testing.T) {
			s := newSilo(t, silo.Config{Partitions: 1, QueueCapacity: 2, HandoffThreshold: time.Hour}, nil)
			ctx := ctxT(t)
			gate := make(chan struct{})
			id := grain.NewID("counter", "a")
			_, err := silo.Call[int](ctx, s, id, incr{0})
			require.NoError(t, err)
			require.NoError(t, s.Tell(ctx, id, hold{gate})) // the owner is busy, and no handoff
			require.Eventually(t, func() bool { return s.Stats().QueueDepth[0] == 0 }, 5*time.Second, time.Millisecond)
			require.NoError(t, s.Tell(ctx, id, incr{1}))
			require.NoError(t, s.Tell(ctx, id, incr{1})) // the queue is full now

			const waiters = 3
			waited := make(chan error, waiters)
			for range waiters { // most are waiting for room by the stop; one not yet there is refused as it comes
				go func() { waited <- s.Tell(ctx, id, incr{1}) }()
			}
			stopped := make(chan error, 1)
			if stop == "Close" {
				// Close cancels the held turn's ctx; hold ignores it, so
				// the gate must open for Close to finish.
				go func() { stopped <- s.Close() }()
			} else {
				go func() { stopped <- s.Shutdown(ctx) }()
			}
			for range waiters {
				require.ErrorIs(t, <-waited, grain.ErrSiloClosed)
			}
			close(gate)
			require.NoError(t, <-stopped)
		})
	}
}
