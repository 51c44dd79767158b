package silo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A tell's or a timer tick's turn that fails has no caller to hear of it:
// the silo logs it and counts it, rather than let the error go nowhere. An
// ask's failure goes to its caller, and is neither.
func TestAFailedTellIsLoggedAndCounted(t *testing.T) {
	var logged syncBuffer
	clk := clock.NewManual(time.Unix(0, 0))
	var ticked grain.ID // an observer the tick tells before it fails
	s := newSilo(t, silo.Config{Logger: newTextLogger(&logged), Clock: clk}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "f", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				switch msg {
				case "panic":
					panic("tell boom")
				case "tick":
					_ = c.Silo().Tell(ctx, ticked, "ticked")
					return nil, errors.New("tick failed")
				case "arm":
					return nil, c.StartTimer("t", time.Second, 0, "tick")
				case "ok":
					return "fine", nil
				}
				return nil, errors.New("tell failed")
			}
		}))
	})
	ctx := ctxT(t)
	obs := newObserver(t, s, 1)
	ticked = obs.ID()
	id := grain.NewID("f", "a")
	_, err := s.Ask(ctx, id, "ask fails")
	require.Error(t, err)
	assert.Zero(t, s.Stats().FailedTells, "an ask's caller has its error")
	assert.Empty(t, logged.String())

	require.NoError(t, s.Tell(ctx, id, "x"))
	require.NoError(t, s.Tell(ctx, id, "panic"))
	_, err = s.Ask(ctx, id, "arm") // after the two tells: a barrier
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s.Stats().FailedTells)
	clk.Advance(time.Second)
	_, err = obs.Receive(ctx) // the tick's turn runs...
	require.NoError(t, err)
	_, err = s.Ask(ctx, id, "ok") // ...and has finished by the next turn
	require.NoError(t, err)
	assert.Equal(t, uint64(3), s.Stats().FailedTells)

	out := logged.String()
	assert.Contains(t, out, `level=WARN msg="granary: a tell's turn failed, with no caller to return the error to" grain=f/a err="tell failed" directive=resume`)
	assert.Contains(t, out, `level=ERROR msg="granary: a tell's turn failed, with no caller to return the error to" grain=f/a`)
	assert.Contains(t, out, "tell boom")
	assert.Contains(t, out, "directive=restart")
	assert.Contains(t, out, `msg="granary: a timer tick's turn failed, with no caller to return the error to" grain=f/a err="tick failed"`)
}
