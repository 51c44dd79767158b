package silo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// endedSession counts its deactivations.
type endedSession struct{ gone *atomic.Int64 }

func (g endedSession) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

func (g endedSession) OnDeactivate(context.Context, *grain.Context) error {
	g.gone.Add(1)
	return nil
}

// watcher tells itself again and again, noting at each turn how many
// sessions have deactivated, until all have or it has run its turns.
type watcher struct {
	gone   *atomic.Int64
	all    int64
	turns  int
	seen   []int64
	report chan<- []int64
}

func (g *watcher) Receive(ctx context.Context, c *grain.Context, _ any) (any, error) {
	n := g.gone.Load()
	g.seen = append(g.seen, n)
	if n == g.all || len(g.seen) == g.turns {
		g.report <- g.seen
		return nil, nil
	}
	return nil, c.Silo().Tell(ctx, c.ID(), "again")
}

// A burst of grains all idle at once — sessions that ended together — is
// collected in slices, between which the partition serves its other
// grains: a grain telling itself over and over runs while the sessions go,
// where it used to wait for all of them (every expired grain was taken in
// one round and every deactivation run in the next: a million on two
// partitions held a live grain's ask for 0.25 s, 2.4 s when each had an
// OnDeactivate).
func TestAMassDeactivationHoldsUpNoLiveGrain(t *testing.T) {
	const sessions = 20_000
	var gone atomic.Int64
	report := make(chan []int64, 1)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: time.Minute, IdleQuantum: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "session", func(grain.ID) endedSession { return endedSession{&gone} }))
		require.NoError(t, silo.Register(s, "watcher", func(grain.ID) *watcher {
			return &watcher{gone: &gone, all: sessions, turns: 1_000_000, report: report}
		}, silo.WithIdleTimeout(time.Hour)))
	})
	ctx := ctxT(t)
	for i := range sessions {
		require.NoError(t, s.Tell(ctx, grain.NewIntID("session", int64(i)), "hello"))
	}
	_, err := s.Ask(ctx, grain.NewIntID("session", 0), "barrier")
	require.NoError(t, err)
	require.Equal(t, sessions, s.Stats().Activations["session"])

	require.NoError(t, s.Tell(ctx, grain.NewID("watcher", "w"), "start"))
	clk.Advance(2 * time.Minute) // every session idle at once
	seen := <-report
	require.Equal(t, int64(sessions), seen[len(seen)-1], "every session went, while the watcher ran")
	partial := 0
	for _, n := range seen {
		if n > 0 && n < sessions {
			partial++
		}
	}
	assert.Positive(t, partial, "the watcher ran between slices of the collection (it ran %d turns)", len(seen))
}
