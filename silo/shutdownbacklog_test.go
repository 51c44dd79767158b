package silo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A Shutdown finishes the work sent before it, though it was queued past
// its grain's backlog limit: a running silo keeps what was on its way to a
// grain whose turns run, and holds its senders instead, and a Shutdown
// keeps it too. It became an overload dead letter as the silo settled,
// after its Tell had returned nil: here 900-odd of 1,000. What turns send
// as the silo settles still meets the limit.
func TestAShutdownFinishesWhatWasSentBeforeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, done := busySilo(t, silo.Config{Partitions: 1, QueueCapacity: 4096, HandoffThreshold: holdThreshold},
			100*time.Microsecond, silo.WithMaxBacklog(10, silo.RejectNewest))
		ctx := t.Context()
		const n = 1000
		for i := range n {
			require.NoError(t, s.Tell(ctx, grain.NewID("busy", "a"), i)) // queued, the grain's first turn under way
		}
		require.NoError(t, s.Shutdown(ctx))
		assert.Equal(t, int64(n), done.Load())
		assert.Zero(t, s.Stats().DeadLetters[grain.ReasonOverload])
	})
}

// What a turn sends as the silo settles meets its target's backlog limit,
// as a Shutdown began: a grain that sends another ever more work cannot
// grow its backlog without bound while the Shutdown waits for the work to
// end.
func TestWhatTurnsSendAsTheSiloSettlesMeetsTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 10
		s, err := silo.New(silo.Config{Partitions: 1, HandoffThreshold: holdThreshold})
		require.NoError(t, err)
		done := new(atomic.Int64)
		require.NoError(t, silo.Register(s, "busy", func(grain.ID) *busyGrain {
			return &busyGrain{done: done, workFor: 100 * time.Microsecond}
		}, silo.WithMaxBacklog(limit, silo.RejectNewest)))
		release := make(chan struct{})
		refused := make(chan int, 1)
		require.NoError(t, silo.Register(s, "sender", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				<-release
				n := 0
				for i := range 1000 {
					if err := s.Tell(ctx, grain.NewID("busy", "a"), i); err != nil {
						assert.ErrorIs(t, err, grain.ErrOverloaded)
						n++
					}
				}
				refused <- n
				return nil, nil
			}
		}))
		require.NoError(t, s.Start())
		ctx := t.Context()
		require.NoError(t, s.Tell(ctx, grain.NewID("sender", "s"), 0))
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(ctx) }()
		synctest.Wait() // the Shutdown has begun
		close(release)
		require.NoError(t, <-shut)
		n := <-refused
		dropped := s.Stats().DeadLetters[grain.ReasonOverload] - uint64(n) // a refusal is one too
		assert.Equal(t, int64(1000-n)-int64(dropped), done.Load(), "every tell handled, refused or dropped")
		assert.Less(t, done.Load(), int64(2*limit), "the backlog passed its limit") // 14 here
	})
}
