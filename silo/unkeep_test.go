package silo_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// keepCanceller asks to be kept (keepSpan), and cancels that from a message
// (keepSpan with d <= 0) or from a timer's tick (unkeepAt).
type keepCanceller struct{ deact chan<- time.Time }

type (
	keepSpan struct{ d time.Duration }
	unkeepAt struct{ due time.Duration }
	unkeep   struct{}
)

func (g *keepCanceller) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case keepSpan:
		c.DelayDeactivation(m.d)
	case unkeepAt:
		return nil, c.StartTimer("unkeep", m.due, 0, unkeep{})
	case unkeep:
		c.DelayDeactivation(-1)
	}
	return nil, nil
}

func (g *keepCanceller) OnDeactivate(context.Context, *grain.Context) error {
	g.deact <- time.Now()
	return nil
}

func keeperSilo(t *testing.T) (*silo.Silo, <-chan time.Time) {
	s, err := silo.New(silo.Config{IdleTimeout: time.Minute, IdleQuantum: time.Second})
	require.NoError(t, err)
	deact := make(chan time.Time, 4)
	require.NoError(t, silo.Register(s, "keeper", func(grain.ID) *keepCanceller { return &keepCanceller{deact} }))
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	return s, deact
}

// notYet fails the test if the grain has deactivated.
func notYet(t *testing.T, deact <-chan time.Time, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case at := <-deact:
		t.Fatalf("%s: deactivated at %v", what, at)
	default:
	}
}

// goneAbout checks, in the bubble, that the grain is still active a second
// before since+after and has deactivated two seconds past it — an idle
// quantum's (a second's) lateness allowed.
func goneAbout(t *testing.T, deact <-chan time.Time, since time.Time, after time.Duration, what string) {
	t.Helper()
	time.Sleep(time.Until(since.Add(after - time.Second)))
	notYet(t, deact, what+": too soon")
	time.Sleep(3 * time.Second)
	synctest.Wait()
	select {
	case at := <-deact:
		assert.InDelta(t, after, at.Sub(since), float64(2*time.Second), what)
	default:
		t.Fatalf("%s: still active %v later", what, time.Since(since))
	}
}

// DelayDeactivation with d <= 0 cancels the keep-alive, as Orleans' does
// with a negative span: from a message, the grain then goes idle as usual —
// its idle timeout after that message — though the wheel had it filed under
// the keep-alive's deadline an hour off. A shorter d does not shorten a
// keep-alive (it keeps the grain at least d).
func TestDelayDeactivationOfZeroOrLessCancelsTheKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, deact := keeperSilo(t)
		id := grain.NewID("keeper", "a")
		_, err := s.Ask(t.Context(), id, keepSpan{time.Hour})
		require.NoError(t, err)
		time.Sleep(2 * time.Minute) // past its idle timeout: kept, refiled at the hour
		notYet(t, deact, "kept for an hour")
		_, err = s.Ask(t.Context(), id, keepSpan{time.Second})
		require.NoError(t, err)
		time.Sleep(2 * time.Minute)
		notYet(t, deact, "a shorter keep-alive leaves the longer one")

		_, err = s.Ask(t.Context(), id, keepSpan{0})
		require.NoError(t, err)
		cancelled := time.Now()
		goneAbout(t, deact, cancelled, time.Minute, "idle for its timeout after the cancel")
	})
}

// Cancelled from a timer's tick — which does not count as activity — a
// grain kept past its idle timeout goes at the next idle round.
func TestAKeepAliveCancelledByATickEndsAtTheNextIdleRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, deact := keeperSilo(t)
		id := grain.NewID("keeper", "a")
		_, err := s.Ask(t.Context(), id, keepSpan{time.Hour})
		require.NoError(t, err)
		_, err = s.Ask(t.Context(), id, unkeepAt{10 * time.Minute})
		require.NoError(t, err)
		start := time.Now()
		goneAbout(t, deact, start, 10*time.Minute, "at the idle round after the tick's cancel")
	})
}
