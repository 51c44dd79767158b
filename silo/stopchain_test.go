package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// caller calls "echo" with a callback into itself; the callback's turn
// interleaves with the waiting one (call-chain reentrancy).
type chainCaller struct{ allow, deactivate bool }

type callBack struct{}

func (g chainCaller) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if _, ok := msg.(callBack); ok {
		return "called back", nil
	}
	if g.allow {
		ctx = silo.AllowCallChainReentrancy(ctx)
	}
	if g.deactivate {
		c.DeactivateOnIdle()
	}
	return silo.Call[string](ctx, c.Silo(), grain.NewID("echo", "b"), c.ID())
}

// echo waits for its gate, then calls back the grain that called it.
type chainEcho struct {
	in   chan<- struct{}
	gate <-chan struct{}
}

func (g chainEcho) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	g.in <- struct{}{}
	<-g.gate
	return silo.Call[string](ctx, c.Silo(), msg.(grain.ID), callBack{})
}

// A Stop or Deactivate that comes while a turn waits on a call lets that
// turn finish, callbacks into the grain on its call chain included: they
// run on the instance that waits for them. They once waited for the fresh
// instance that would follow the one waiting for them, so the call chain
// hung until its deadline.
func TestStopWhileATurnWaitsForItsCallChain(t *testing.T) {
	for name, c := range map[string]struct {
		opts       []silo.KindOption
		allow      bool
		deactivate bool // DeactivateOnIdle from the waiting turn itself
		stop       func(*silo.Silo, context.Context, grain.ID) error
	}{
		"reentrant kind, Stop":                    {opts: []silo.KindOption{silo.WithReentrant()}, stop: (*silo.Silo).Stop},
		"reentrant kind, Deactivate":              {opts: []silo.KindOption{silo.WithReentrant()}, stop: (*silo.Silo).Deactivate},
		"call-chain reentrancy, Stop":             {allow: true, stop: (*silo.Silo).Stop},
		"call-chain reentrancy, Deactivate":       {allow: true, stop: (*silo.Silo).Deactivate},
		"call-chain reentrancy, DeactivateOnIdle": {allow: true, deactivate: true},
	} {
		t.Run(name, func(t *testing.T) {
			in, gate := make(chan struct{}), make(chan struct{})
			s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "caller", func(grain.ID) chainCaller { return chainCaller{allow: c.allow, deactivate: c.deactivate} }, c.opts...))
				require.NoError(t, silo.Register(s, "echo", func(grain.ID) chainEcho { return chainEcho{in: in, gate: gate} }))
			})
			ctx := ctxT(t)
			a := grain.NewID("caller", "a")
			got := make(chan error, 1)
			start := time.Now()
			go func() {
				v, err := silo.Call[string](ctx, s, a, "go")
				if err == nil && v != "called back" {
					err = assert.AnError
				}
				got <- err
			}()
			<-in // a's turn waits on echo
			if c.stop != nil {
				require.NoError(t, c.stop(s, ctx, a))
			}
			close(gate)
			require.NoError(t, <-got)
			assert.Less(t, time.Since(start), 5*time.Second, "answered, not timed out")
			// The stop took effect once the turn was over: a fresh instance
			// answers the next call (the gate is open now).
			_, err := silo.Call[string](ctx, s, a, callBack{})
			require.NoError(t, err)
		})
	}
}
