package silo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A tell's dead letter is logged — its sender had nil from Tell and hears
// of the loss nowhere else — sampled per reason; an ask's is not: its
// caller has the error.
func TestATellsDeadLetterIsLogged(t *testing.T) {
	var logged syncBuffer
	s := newSilo(t, silo.Config{Logger: newTextLogger(&logged), LogSampling: silo.LogSampling{First: 3}},
		func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "g", func(grain.ID) grain.Func {
				return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
					if gate, ok := msg.(chan struct{}); ok {
						<-gate
					}
					return nil, nil
				}
			}))
		})
	ctx := ctxT(t)
	dl := s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	id := grain.NewID("g", "a")
	gate := make(chan struct{})
	require.NoError(t, s.Tell(ctx, id, gate))
	for range 5 {
		require.NoError(t, s.Tell(ctx, id, "m"))
	}
	asked := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, "q"); asked <- err }()
	waitBacklog(t, s, 6) // the turn holds the gate; six wait behind it
	require.NoError(t, s.Stop(ctx, id))
	close(gate)
	require.ErrorIs(t, <-asked, grain.ErrGrainStopped)
	for range 6 {
		assert.Equal(t, grain.ReasonStopped, (<-dl.C).Reason)
	}
	_, err := s.Ask(ctx, id, "after") // a fresh instance, once the lines are written
	require.NoError(t, err)

	s.WaitLogged()
	out := logged.String()
	const line = `level=INFO msg="granary: a tell became a dead letter: stopped" target=g/a msg_type=string`
	assert.Equal(t, 3, strings.Count(out, line), out)
	assert.Equal(t, 3, strings.Count(out, "dead letter"), "the ask's is not logged")
	assert.Equal(t, uint64(2), s.Stats().DroppedLogLines, "five tells: three lines, two dropped")
}
