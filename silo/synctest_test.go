package silo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// sleeper is a grain for tests in a synctest bubble: it records its
// deactivations, counts timer ticks, and can wait on its turn's ctx.
type sleeper struct {
	deact chan time.Time
	ticks *atomic.Int32
}

type (
	waitForCtx   struct{}
	startTicking struct{ every time.Duration }
	tick         struct{}
)

func (g *sleeper) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case waitForCtx:
		<-ctx.Done()
		return nil, context.Cause(ctx)
	case startTicking:
		return nil, c.StartTimer("tick", m.every, m.every, tick{})
	case tick:
		g.ticks.Add(1)
	}
	return "ok", nil
}

func (g *sleeper) OnDeactivate(context.Context, *grain.Context) error {
	g.deact <- time.Now()
	return nil
}

// bubbleSilo starts a silo inside the current synctest bubble and stops it
// at the end of the bubble: the bubble fails if a goroutine of the silo is
// left behind.
func bubbleSilo(t *testing.T, cfg silo.Config) (*silo.Silo, chan time.Time, *atomic.Int32) {
	s, err := silo.New(cfg)
	require.NoError(t, err)
	deact, ticks := make(chan time.Time, 16), new(atomic.Int32)
	require.NoError(t, silo.Register(s, "sleeper", func(grain.ID) *sleeper { return &sleeper{deact, ticks} }))
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	return s, deact, ticks
}

// In a synctest bubble, time.Sleep synchronises nothing: it moves the
// bubble's fake clock, deterministically, once every goroutine in it is
// blocked. That is the point of these tests.

// Under testing/synctest the silo runs on the bubble's fake clock with no
// Config.Clock: idle deactivation comes at the idle timeout, no sooner and
// at most one quantum later, however long the test's time is.
func TestSynctestIdleDeactivation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, deact, _ := bubbleSilo(t, silo.Config{IdleTimeout: time.Hour, IdleQuantum: time.Second})
		_, err := s.Ask(t.Context(), grain.NewID("sleeper", "a"), "hello")
		require.NoError(t, err)
		last := time.Now()
		time.Sleep(time.Hour - time.Nanosecond)
		synctest.Wait()
		select {
		case at := <-deact:
			t.Fatalf("deactivated after %v idle", at.Sub(last))
		default:
		}
		at := <-deact // time moves on while the test waits
		require.GreaterOrEqual(t, at.Sub(last), time.Hour)
		require.LessOrEqual(t, at.Sub(last), time.Hour+time.Second)
	})
}

// The default call timeout and a handler's ctx end together, at
// Config.CallTimeout; a timer ticks on the bubble's clock.
func TestSynctestCallTimeoutAndTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, ticks := bubbleSilo(t, silo.Config{CallTimeout: time.Minute})
		start := time.Now()
		_, err := s.Ask(context.Background(), grain.NewID("sleeper", "w"), waitForCtx{})
		var te *grain.TimeoutError
		require.ErrorAs(t, err, &te)
		require.True(t, errors.Is(err, context.DeadlineExceeded))
		require.Equal(t, time.Minute, time.Since(start))

		_, err = s.Ask(t.Context(), grain.NewID("sleeper", "t"), startTicking{every: time.Second})
		require.NoError(t, err)
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		require.EqualValues(t, 10, ticks.Load())
	})
}

// A kind's WithCallTimeout bounds the calls to it whose ctx has no deadline,
// in place of Config.CallTimeout; a ctx's own deadline still wins.
func TestSynctestKindCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := silo.New(silo.Config{CallTimeout: time.Hour})
		require.NoError(t, err)
		newSleeper := func(grain.ID) *sleeper { return &sleeper{make(chan time.Time, 16), new(atomic.Int32)} }
		require.NoError(t, silo.Register(s, "report", newSleeper, silo.WithCallTimeout(5*time.Minute)))
		require.NoError(t, silo.Register(s, "plain", newSleeper))
		require.NoError(t, s.Start())
		t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })

		for kind, want := range map[string]time.Duration{"report": 5 * time.Minute, "plain": time.Hour} {
			start := time.Now()
			_, err = s.Ask(context.Background(), grain.NewID(kind, "r"), waitForCtx{})
			require.ErrorIs(t, err, context.DeadlineExceeded, kind)
			require.Equal(t, want, time.Since(start), kind)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		_, err = s.Ask(ctx, grain.NewID("report", "r"), waitForCtx{})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 10*time.Minute, time.Since(start), "the ctx's deadline, longer than the kind's, wins")

		for _, d := range []time.Duration{0, -time.Second} {
			s2, err := silo.New(silo.Config{})
			require.NoError(t, err)
			require.ErrorIs(t, silo.Register(s2, "bad", newSleeper, silo.WithCallTimeout(d)), grain.ErrInvalidConfig)
		}
	})
}
