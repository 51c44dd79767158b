package silo

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// An idle silo's handoff monitor sleeps, and the first message wakes it: a
// turn that blocks after a long quiet spell is still handed off within two
// thresholds, so its partition's other grains are served.
func TestWatchdogSleepsWhileIdleAndWakesForWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const threshold = 5 * time.Millisecond
		s, err := New(Config{Partitions: 1, HandoffThreshold: threshold})
		require.NoError(t, err)
		release := make(chan struct{})
		require.NoError(t, Register(s, "g", func(grain.ID) grain.Func {
			return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "block" {
					<-release
				}
				return "ok", nil
			}
		}))
		require.NoError(t, s.Start())
		defer func() { require.NoError(t, s.Shutdown(context.Background())) }()

		for round := range 3 {
			// Quiet, and half-way between two idle ticks (each wakes the
			// owners, and they the monitor, for one look).
			time.Sleep(time.Minute + time.Second/2) // the bubble's fake clock: no real wait
			synctest.Wait()
			require.True(t, s.dog.sleeping.Load(), "round %d: the monitor still ticks in an idle silo", round)

			ctx := t.Context()
			require.NoError(t, s.Tell(ctx, grain.NewID("g", "blocked"), "block"))
			start := time.Now()
			v, err := s.Ask(ctx, grain.NewID("g", "other"), "hello")
			require.NoError(t, err)
			require.Equal(t, "ok", v)
			require.LessOrEqual(t, time.Since(start), 2*threshold+time.Millisecond, "round %d", round)
			release <- struct{}{}
		}
	})
}
