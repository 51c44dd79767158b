package silo_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// An activation that keeps failing is not retried by every message: the
// first retry is at once, later ones back off as restarts do, and past the
// restart limit the identity is refused for the quarantine. Callers in
// between fail at once with the activation's error; the hook is not called.
func TestRepeatedActivationFailuresBackOffThenQuarantine(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cause := errors.New("storage down")
	var attempts atomic.Int32
	var healthy atomic.Bool
	sup := activation.Supervision{MaxRestarts: 3, Window: time.Minute, MinBackoff: time.Second, MaxBackoff: 4 * time.Second, Quarantine: time.Minute}
	s := newSilo(t, silo.Config{Clock: clk, IdleQuantum: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flaky", func(grain.ID) *failingActivator {
			attempts.Add(1)
			if healthy.Load() {
				return &failingActivator{}
			}
			return &failingActivator{err: cause}
		}, silo.WithSupervision(sup)))
	})
	ctx := ctxT(t)
	id := grain.NewID("flaky", "a")
	ask := func() error {
		t.Helper()
		_, err := s.Ask(ctx, id, get{})
		require.ErrorIs(t, err, grain.ErrActivation)
		require.ErrorIs(t, err, cause, "the refusal names the activation's own error")
		return err
	}
	tries := func(want int32, msg string) {
		t.Helper()
		assert.Equal(t, want, attempts.Load(), msg)
	}

	ask()
	tries(1, "first failure")
	ask()
	tries(2, "the first retry is at once")
	for range 5 {
		ask()
	}
	tries(2, "within the backoff: refused without a try")
	clk.Advance(time.Second) // second failure: 1 s of backoff
	ask()
	tries(3, "after the backoff, a try")
	clk.Advance(time.Second) // third: 2 s
	ask()
	tries(3, "still backing off")
	clk.Advance(time.Second)
	ask()
	tries(4, "fourth failure: past MaxRestarts (3) in the window")
	clk.Advance(59 * time.Second)
	ask()
	tries(4, "quarantined for a minute")

	healthy.Store(true)
	clk.Advance(time.Second)
	n, err := silo.Call[int](ctx, s, id, incr{1})
	require.NoError(t, err, "after the quarantine, a fresh try")
	assert.Equal(t, 1, n)
	tries(5, "")
	assert.Equal(t, 0, int(s.Stats().Restarts), "activation retries are not restarts")
}

// Activations failing for many distinct identities (ids that do not exist)
// are tracked up to a bound, not one entry each for a Window: past it, an
// identity's retries are not held back.
func TestActivationFailuresOfManyIdentitiesAreBounded(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // still: backoffs never pass
	var attempts atomic.Int32
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "missing", func(grain.ID) *failingActivator {
			attempts.Add(1)
			return &failingActivator{err: errors.New("no such user")}
		}))
	})
	ctx := ctxT(t)
	const n = 10_000
	for i := range n {
		_, err := s.Ask(ctx, grain.NewIntID("missing", int64(i)), get{})
		require.ErrorIs(t, err, grain.ErrActivation)
	}
	require.Equal(t, int32(n), attempts.Load(), "every identity tried once")
	tries := func(key int64) int32 {
		before := attempts.Load()
		for range 3 {
			_, err := s.Ask(ctx, grain.NewIntID("missing", key), get{})
			require.ErrorIs(t, err, grain.ErrActivation)
		}
		return attempts.Load() - before
	}
	assert.Equal(t, int32(1), tries(0), "tracked: the retry at once, then held back")
	assert.Equal(t, int32(3), tries(n-1), "past the bound: untracked, every message tries")
}
