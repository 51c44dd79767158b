package silo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

type deciderTraceKey struct{}

// deciderSaw is what a ContextDecider found about the failure it decided.
type deciderSaw struct {
	trace     any   // the caller's value, read from the Decider's ctx
	reported  any   // what a grain it called read from its own ctx
	reportErr error // that call's error
	self      any   // a call back to the failed grain
	selfErr   error
}

// reportingSilo is flakySilo with a ContextDecider that reports each
// failure on saw: it calls a reporter grain, which answers with the trace
// value of its ctx, and calls the failed grain back.
func reportingSilo(t *testing.T, reentrant bool, saw chan<- deciderSaw) *silo.Silo {
	var s *silo.Silo
	decider := activation.ContextDeciderFunc(func(ctx context.Context, id grain.ID, _ error) activation.Directive {
		r := deciderSaw{trace: ctx.Value(deciderTraceKey{})}
		r.reported, r.reportErr = s.Ask(ctx, grain.NewID("reporter", "r"), id)
		r.self, r.selfErr = s.Ask(ctx, id, "hello")
		saw <- r
		return activation.Resume
	})
	opts := []silo.KindOption{silo.WithSupervision(activation.Supervision{Decider: decider})}
	if reentrant {
		opts = append(opts, silo.WithReentrant())
	}
	s = newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flaky", flaky, opts...))
		require.NoError(t, silo.Register(s, "reporter", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				return ctx.Value(deciderTraceKey{}), nil
			}
		}))
	})
	return s
}

// A ContextDecider is given the failed turn's ctx, whatever the path the
// failure took — a grain's first message (its activation turn), a later
// one, a handler's runtime.Goexit, an interleaved turn of a reentrant
// grain: it has the caller's values, and what it does is the turn's doing.
// A call it makes carries them on; a call back to the failed grain fails at
// once with ErrCallCycle, as from the handler (a Decider without a ctx
// waited out the call's timeout there), and one to a reentrant grain
// interleaves, the Decider giving up the grain's turn while it waits, as a
// handler does.
func TestAContextDeciderHasTheFailedTurnsCtx(t *testing.T) {
	for _, tc := range []struct {
		name        string
		msg         string
		want        error
		activated   bool // a message ran before: the failure is not the first
		reentrant   bool
		interleaved bool // another turn waits as it fails
	}{
		{"the first message", "fail", errFlaky, false, false, false},
		{"a later message", "fail", errFlaky, true, false, false},
		{"a handler's Goexit", "exit", silo.ErrGoexit, true, false, false},
		{"a Goexit in the first message", "exit", silo.ErrGoexit, false, false, false},
		{"a reentrant grain's turn", "fail", errFlaky, true, true, false},
		{"an interleaved turn", "fail", errFlaky, true, true, true},
		{"an interleaved handler's Goexit", "exit", silo.ErrGoexit, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saw := make(chan deciderSaw, 1)
			s := reportingSilo(t, tc.reentrant, saw)
			ctx := ctxT(t)
			id := grain.NewID("flaky", "a")
			if tc.activated {
				_, err := s.Ask(ctx, id, "hello")
				require.NoError(t, err)
			}
			held := func() {}
			if tc.interleaved {
				held = holdATurn(t, ctx, s, id) // the failing message interleaves
			}
			_, err := s.Ask(context.WithValue(ctx, deciderTraceKey{}, "trace-1"), id, tc.msg)
			require.ErrorIs(t, err, tc.want)
			r := <-saw
			assert.Equal(t, "trace-1", r.trace, "the caller's value")
			require.NoError(t, r.reportErr)
			assert.Equal(t, "trace-1", r.reported, "carried on by the Decider's call")
			if tc.reentrant {
				require.NoError(t, r.selfErr, "a reentrant grain lets the Decider's call in")
				assert.Equal(t, "ok", r.self)
			} else {
				require.ErrorIs(t, r.selfErr, grain.ErrCallCycle)
			}
			held()
			v, err := silo.Call[string](ctx, s, id, "hello")
			require.NoError(t, err)
			assert.Equal(t, "ok", v, "the grain goes on")
		})
	}
}

// A tell's failure has no caller: the ctx its ContextDecider gets carries
// the turn alone, and ends with the silo.
func TestAContextDeciderOfATell(t *testing.T) {
	saw := make(chan deciderSaw, 1)
	s := reportingSilo(t, false, saw)
	id := grain.NewID("flaky", "a")
	require.NoError(t, s.Tell(context.WithValue(ctxT(t), deciderTraceKey{}, "trace-1"), id, "fail"))
	r := <-saw
	assert.Nil(t, r.trace, "a tell carries no ctx values but through a ContextPropagator")
	require.NoError(t, r.reportErr)
	require.ErrorIs(t, r.selfErr, grain.ErrCallCycle)
}

// A fail-stop ContextDecider calls Shutdown with its turn's ctx: Shutdown
// knows it comes from the turn, begins, and returns ErrShutdownFromTurn at
// once, as in a handler; the failed turn's caller has its error, and the
// silo shuts down. (A Decider without a ctx must start Shutdown on a
// goroutine of its own: TestADeciderCanShutTheSiloDown.)
func TestAContextDeciderCanShutTheSiloDownWithItsCtx(t *testing.T) {
	var s *silo.Silo
	shut := make(chan error, 1)
	failStop := activation.ContextDeciderFunc(func(ctx context.Context, _ grain.ID, _ error) activation.Directive {
		shut <- s.Shutdown(ctx)
		return activation.Stop
	})
	s = newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flaky", flaky, silo.WithSupervision(activation.Supervision{Decider: failStop})))
	})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("flaky", "a"), "fail")
	require.ErrorIs(t, err, errFlaky)
	require.ErrorIs(t, <-shut, silo.ErrShutdownFromTurn)
	<-s.Done()
	_, err = s.Ask(ctx, grain.NewID("flaky", "b"), "hello")
	require.ErrorIs(t, err, silo.ErrSiloClosed)
}

// Outside a runtime, Supervision.Decide asks a ContextDecider through
// Decide: with a ctx that carries nothing and never ends.
func TestAContextDeciderOutsideATurn(t *testing.T) {
	var got context.Context
	policy := activation.Supervision{Decider: activation.ContextDeciderFunc(
		func(ctx context.Context, _ grain.ID, _ error) activation.Directive {
			got = ctx
			return activation.Stop
		})}.WithDefaults()
	d, _ := policy.Decide(&activation.Restarts{}, grain.NewID("k", "a"), errors.New("boom"), 0)
	assert.Equal(t, activation.Stop, d)
	require.NotNil(t, got)
	assert.Nil(t, got.Done())
}
