package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A grain's Context.Now is the silo's clock: a test's manual one too.
func TestContextNowIsTheSilosClock(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewManual(start)
	s := newSilo(t, silo.Config{Clock: clk}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "clock", func(grain.ID) grain.Func {
			return func(_ context.Context, c *grain.Context, _ any) (any, error) { return c.Now(), nil }
		}))
	})
	ctx := ctxT(t)
	now, err := silo.Call[time.Time](ctx, s, grain.NewID("clock", "c"), "now?")
	require.NoError(t, err)
	assert.True(t, now.Equal(start), "%v", now)
	clk.Advance(time.Hour)
	now, err = silo.Call[time.Time](ctx, s, grain.NewID("clock", "c"), "now?")
	require.NoError(t, err)
	assert.True(t, now.Equal(start.Add(time.Hour)), "%v", now)
}
