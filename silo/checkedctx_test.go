package silo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// gcKeeper hands the Context of each of its turns — OnActivate's, a
// message's, a timer tick's, OnDeactivate's — to the test, as a handler
// that starts a goroutine with its gc does.
type gcKeeper struct{ kept chan<- *grain.Context }

type (
	keepMine  struct{}
	keepTimer struct{}
	keepTick  struct{}
	keepInUse struct{ done chan grain.ID }
)

func (g *gcKeeper) OnActivate(_ context.Context, c *grain.Context) error {
	g.kept <- c
	return nil
}

func (g *gcKeeper) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case keepTimer:
		return nil, c.StartTimer("t", time.Millisecond, 0, keepTick{})
	case keepInUse: // used from a goroutine during the turn: fine
		go func() { m.done <- c.ID() }()
		return <-m.done, nil
	}
	g.kept <- c
	return "kept", nil
}

func (g *gcKeeper) OnDeactivate(_ context.Context, c *grain.Context) error {
	g.kept <- c
	return nil
}

// afterTurn calls the kept Context's ID and returns what it panicked with.
func afterTurn(c *grain.Context) (v any) {
	defer func() { v = recover() }()
	c.ID()
	return nil
}

// With Config.CheckContexts every turn's Context is its own, and used
// after the turn it panics with a *grain.ContextAfterTurnError naming its
// grain — the activation's, a message's, a tick's, the deactivation's.
func TestCheckContextsCatchesAContextKeptPastItsTurn(t *testing.T) {
	kept := make(chan *grain.Context, 8)
	s := newSilo(t, silo.Config{CheckContexts: true}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "keeper", func(grain.ID) *gcKeeper { return &gcKeeper{kept} }))
	})
	ctx := ctxT(t)
	alice, bob := grain.NewID("keeper", "alice"), grain.NewID("keeper", "bob")

	_, err := s.Ask(ctx, alice, keepMine{})
	require.NoError(t, err)
	onActivate, turn := <-kept, <-kept
	_, err = s.Ask(ctx, bob, keepMine{}) // the worker runs another grain's turns
	require.NoError(t, err)
	<-kept
	<-kept
	_, err = s.Ask(ctx, alice, keepTimer{})
	require.NoError(t, err)
	tick := <-kept
	require.NoError(t, s.Deactivate(ctx, alice))
	onDeactivate := <-kept
	_, err = s.Ask(ctx, bob, keepMine{}) // a barrier: alice's deactivation turn has ended
	require.NoError(t, err)
	<-kept

	for name, c := range map[string]*grain.Context{"OnActivate": onActivate, "a message": turn, "a tick": tick, "OnDeactivate": onDeactivate} {
		v := afterTurn(c)
		err, ok := v.(error)
		require.True(t, ok, "%s's Context after its turn: panicked with %v", name, v)
		var after *grain.ContextAfterTurnError
		require.ErrorAs(t, err, &after, name)
		assert.Equal(t, alice, after.ID, "%s's: names its own grain, not the turn the worker ran next", name)
		assert.Equal(t, "ID", after.Method)
		assert.ErrorIs(t, err, grain.ErrContextAfterTurn)
	}

	// During its turn, a goroutine of the handler may read it.
	done := make(chan grain.ID)
	v, err := s.Ask(ctx, bob, keepInUse{done})
	require.NoError(t, err)
	assert.Equal(t, bob, v)
}

// A failed turn's Context ends too: the panic of a kept one names the
// grain whose handler panicked.
func TestCheckContextsEndsAFailedTurnsContext(t *testing.T) {
	kept := make(chan *grain.Context, 1)
	s := newSilo(t, silo.Config{CheckContexts: true}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "boom", func(grain.ID) grain.Func {
			return func(_ context.Context, c *grain.Context, msg any) (any, error) {
				kept <- c
				panic("boom")
			}
		}))
	})
	id := grain.NewID("boom", "b")
	_, err := s.Ask(ctxT(t), id, "go")
	require.ErrorIs(t, err, grain.ErrPanic)
	c := <-kept
	var after *grain.ContextAfterTurnError
	v := afterTurn(c)
	err, _ = v.(error)
	require.True(t, errors.As(err, &after), "panicked with %v", v)
	assert.Equal(t, id, after.ID)
}
