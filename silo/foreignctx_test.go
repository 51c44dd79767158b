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

// A caller grain calls the grain its message names, with the ctx the
// message says: its turn's, one made from it, or one of its own.
type ctxCaller struct{ s *silo.Silo }

type callWith struct {
	to  grain.ID
	ctx string // "turn", "withoutCancel", "background"
}

func (g *ctxCaller) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case callWith:
		c := ctx
		switch m.ctx {
		case "withoutCancel":
			c = context.WithoutCancel(ctx)
		case "background":
			c = context.Background() // the mistake: the call carries no chain
		}
		return g.s.Ask(c, m.to, "ping")
	case string:
		return "pong", nil
	}
	return nil, errors.New("ctxCaller: unknown message")
}

func ctxCallerSilo(t *testing.T, cfg silo.Config) *silo.Silo {
	return newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "caller", func(grain.ID) *ctxCaller { return &ctxCaller{s: s} }))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
}

// With Config.CheckContexts (silotest.Start's), a call a turn makes with a
// ctx that is not its own fails at once with ErrForeignContext, whether or
// not it would have closed a cycle; one made with the turn's ctx, or one
// derived from it, is a call as any, and a call from outside any turn is
// not looked at.
func TestACallFromATurnWithAForeignCtxIsRefusedWhenChecked(t *testing.T) {
	s := ctxCallerSilo(t, silo.Config{CheckContexts: true})
	ctx := ctxT(t)
	a, b := grain.NewID("caller", "a"), grain.NewID("caller", "b")

	for _, to := range []grain.ID{a, b} { // itself (a deadlock unseen), another (none)
		_, err := s.Ask(ctx, a, callWith{to: to, ctx: "background"})
		require.ErrorIs(t, err, grain.ErrForeignContext, "to %v", to)
		assert.ErrorContains(t, err, "a call of string to "+to.String())
	}

	_, err := s.Ask(ctx, a, callWith{to: a, ctx: "turn"})
	assert.ErrorIs(t, err, grain.ErrCallCycle, "the turn's own ctx: the cycle is seen")
	_, err = s.Ask(ctx, a, callWith{to: a, ctx: "withoutCancel"})
	assert.ErrorIs(t, err, grain.ErrCallCycle, "a ctx made from the turn's keeps its chain")
	r, err := s.Ask(ctx, a, callWith{to: b, ctx: "turn"})
	require.NoError(t, err)
	assert.Equal(t, "pong", r)

	r, err = s.Ask(context.Background(), b, "ping") // from outside: nothing to check
	require.NoError(t, err)
	assert.Equal(t, "pong", r)
}

// Unchecked (a silo's default), such a call to the grain itself is a
// deadlock the silo cannot see: it waits for its timeout, whose error then
// says the ctx was not the turn's. A timeout of a call made with the
// turn's ctx, or from outside, says nothing of the kind.
func TestACallFromATurnWithAForeignCtxTimesOutSayingSo(t *testing.T) {
	s := ctxCallerSilo(t, silo.Config{CallTimeout: 20 * time.Millisecond})
	ctx := ctxT(t) // the outer ask's deadline is far past the inner one's timeout
	a := grain.NewID("caller", "a")

	_, err := s.Ask(ctx, a, callWith{to: a, ctx: "background"})
	var te *grain.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.ForeignContext, "%v", err)
	assert.ErrorIs(t, err, grain.ErrTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "with a ctx that is not the turn's")

	// A grain held in a turn: a call from a turn with a ctx made from its
	// own, and one from outside, time out — and say nothing of the ctx.
	// (Made without its deadline, the turn's ctx leaves the call to the
	// silo's CallTimeout; the turn's own would keep the outer ask's 20 s,
	// and the outer ask's timeout would race the inner call's.)
	blocker := grain.NewID("counter", "x")
	release := make(chan struct{})
	defer close(release)
	require.NoError(t, s.Tell(ctx, blocker, block{release}))
	_, err = s.Ask(ctx, a, callWith{to: blocker, ctx: "withoutCancel"})
	te = nil
	require.ErrorAs(t, err, &te)
	assert.False(t, te.ForeignContext, "%v", err)
	assert.NotContains(t, err.Error(), "not the turn's")

	_, err = s.Ask(context.Background(), blocker, get{}) // the silo's CallTimeout
	te = nil
	require.ErrorAs(t, err, &te)
	assert.False(t, te.ForeignContext, "%v", err)
	assert.NotContains(t, err.Error(), "not the turn's")
}
