package silo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// selfStopper stops itself from its first activation's OnActivate, once
// the test lets it.
type selfStopper struct {
	s       *silo.Silo
	gen     int
	entered chan<- struct{}
	release <-chan struct{}
}

func (g *selfStopper) OnActivate(ctx context.Context, c *grain.Context) error {
	if g.gen > 1 {
		return nil
	}
	g.entered <- struct{}{}
	<-g.release
	return g.s.Stop(ctx, c.ID())
}

func (g *selfStopper) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	return fmt.Sprintf("generation %d: %v", g.gen, msg), nil
}

// Stop called from OnActivate lets the message whose activation it is run
// first — an activation begins its first message's turn — and the messages
// that came while it activated are stopped, as Stop says; the next goes to
// a fresh instance.
func TestStopFromOnActivateRunsTheActivatingMessageFirst(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	gens := 0
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "stopper", func(grain.ID) *selfStopper {
			gens++ // the factory runs on the partition, one activation at a time
			return &selfStopper{s: s, gen: gens, entered: entered, release: release}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("stopper", "a")
	type answer struct {
		v   any
		err error
	}
	ask := func(msg string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			v, err := s.Ask(ctx, id, msg)
			ch <- answer{v, err}
		}()
		return ch
	}
	first := ask("first")
	<-entered
	second, third := ask("second"), ask("third")
	waitBacklog(t, s, 2)
	close(release)

	a := <-first
	require.NoError(t, a.err)
	assert.Equal(t, "generation 1: first", a.v)
	for _, ch := range []<-chan answer{second, third} {
		require.ErrorIs(t, (<-ch).err, grain.ErrGrainStopped)
	}
	v, err := s.Ask(ctx, id, "later")
	require.NoError(t, err)
	assert.Equal(t, "generation 2: later", v)
}
