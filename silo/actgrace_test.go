package silo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// startingGrain's activation takes its time: held off its core for hold
// (a time.Sleep on the bubble's clock, as the host holding its goroutine),
// then, if gate is set, until the gate closes — its ctx ended or not.
type startingGrain struct {
	hold time.Duration
	gate chan struct{}
	done *atomic.Int64
}

func (g *startingGrain) OnActivate(context.Context, *grain.Context) error {
	time.Sleep(g.hold)
	if g.gate != nil {
		<-g.gate
	}
	return nil
}

func (g *startingGrain) Receive(context.Context, *grain.Context, any) (any, error) {
	g.done.Add(1)
	return nil, nil
}

// startingSilo is a silo of one partition whose "starting" grains, their
// backlog limited to 8 (RejectNewest), are made by newGrain; it returns
// the silo and the turns they handled.
func startingSilo(t *testing.T, cfg silo.Config, newGrain func() *startingGrain) (*silo.Silo, *atomic.Int64) {
	t.Helper()
	cfg.Partitions, cfg.QueueCapacity, cfg.HandoffThreshold = 1, 64, holdThreshold
	s, err := silo.New(cfg)
	require.NoError(t, err)
	done := new(atomic.Int64)
	require.NoError(t, silo.Register(s, "starting", func(grain.ID) *startingGrain {
		g := newGrain()
		g.done = done
		return g
	}, silo.WithMaxBacklog(8, silo.RejectNewest)))
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Close() })
	return s, done
}

// tellEvery tells id n messages, one each interval on the clock of the
// synctest bubble it runs in, and returns how many were refused
// (ErrOverloaded).
func tellEvery(t *testing.T, s *silo.Silo, id grain.ID, n int, interval time.Duration) (refused int) {
	for i := range n {
		if err := s.Tell(t.Context(), id, i); err != nil {
			require.ErrorIs(t, err, grain.ErrOverloaded)
			refused++
		}
		time.Sleep(interval)
	}
	return refused
}

// An activation turn the host holds off its core — a hot grain's first
// message at a cold start — has the grace a message's turn has: its
// backlog, full, holds its senders at its door until the activation is
// back, rather than refusing them. Without it, an activation held eight
// thresholds with a message sent every 300 µs lost 225 of 400 (100
// refused, 125 dead letters).
func TestAnActivationHeldOffItsCoreRefusesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, done := startingSilo(t, silo.Config{}, func() *startingGrain { return &startingGrain{hold: 8 * holdThreshold} })
		refused := tellEvery(t, s, grain.NewID("starting", "a"), 400, 300*time.Microsecond)
		require.NoError(t, s.Shutdown(t.Context()))
		st := s.Stats()
		require.NotZero(t, st.Handoffs, "the monitor took the activation's turn")
		assert.Zero(t, refused, "tells refused")
		assert.Zero(t, st.DeadLetters[grain.ReasonOverload])
		assert.EqualValues(t, 400, done.Load())
	})
}

// An activation that blocks past its grace is taken for blocked, as a
// message's turn is: what came past the backlog's limit is refused from
// then on — not before the grace is over — and once the activation
// returns, the grain takes messages again.
func TestAnActivationBlockedPastTheGraceOverflows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		s, done := startingSilo(t, silo.Config{}, func() *startingGrain { return &startingGrain{gate: gate} })
		id := grain.NewID("starting", "a")
		start := time.Now()
		var refusedAt time.Time
		for i := 0; refusedAt.IsZero(); i++ {
			if err := s.Tell(t.Context(), id, i); err != nil {
				require.ErrorIs(t, err, grain.ErrOverloaded)
				refusedAt = time.Now()
			}
			time.Sleep(300 * time.Microsecond)
		}
		assert.GreaterOrEqual(t, refusedAt.Sub(start), silo.GraceFor(holdThreshold), "refused before the grace was over")
		close(gate)
		synctest.Wait() // the activation returns, and its backlog is worked down
		_, err := s.Ask(t.Context(), id, "after")
		require.NoError(t, err, "served again once the activation is back")
		assert.Positive(t, done.Load())
	})
}

// An activation given up on (Config.ActivationTimeout) within its grace,
// its hook going on alone past the grace, leaves nothing of its hold
// behind: the grain that follows it takes messages, none refused as
// overloaded for its predecessor.
func TestAnActivationGivenUpInItsGraceLeavesNoOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var made atomic.Int64
		gate := make(chan struct{}) // the first activation's hook ignores its ctx and waits for this
		cfg := silo.Config{ActivationTimeout: 30 * time.Millisecond, IdleTimeout: 80 * time.Millisecond}
		s, done := startingSilo(t, cfg, func() *startingGrain {
			if made.Add(1) == 1 {
				return &startingGrain{gate: gate}
			}
			return &startingGrain{}
		})
		id := grain.NewID("starting", "a")
		tellEvery(t, s, id, 200, 300*time.Microsecond) // through the give-up
		st := s.Stats()
		require.NotZero(t, st.DeadLetters[grain.ReasonActivationFailed], "the activation was given up on")
		time.Sleep(2 * silo.GraceFor(holdThreshold))
		for i := range 20 {
			err := s.Tell(t.Context(), id, i)
			require.False(t, errors.Is(err, grain.ErrOverloaded), "refused for the grain given up on: %v", err)
		}
		_, err := s.Ask(t.Context(), id, "after")
		require.NoError(t, err)
		assert.Positive(t, done.Load())
		close(gate) // the hook given up on returns, to nothing
	})
}
