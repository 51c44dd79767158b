package silo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
)

// reasonGrain records the reason its OnDeactivate was given.
type reasonGrain struct{ seen *grain.DeactivationReason }

func (g *reasonGrain) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

func (g *reasonGrain) OnDeactivate(_ context.Context, c *grain.Context) error {
	*g.seen = c.DeactivationReason()
	return nil
}

// A Stop taken after supervision decided to restart a grain but before the
// failed instance's hook began — in the same round of its owner: the
// failing turn's outcome and the Stop drained together — makes the grain
// go rather than restart, and its hook is still told of the failure: the
// instance's state is suspect, whatever asked it to go. The owner's steps
// are driven here one by one, in that order, which a silo's goroutines
// give no test a way to choose.
func TestAStopBeforeTheRestartHookLeavesTheReasonFailed(t *testing.T) {
	p, w := ownedPartition(t, t.Context(), Config{})
	p.base = t.Context() // a started silo's partitions have theirs from Start
	var seen grain.DeactivationReason
	require.NoError(t, Register(p.s, "hooked", func(grain.ID) *reasonGrain { return &reasonGrain{seen: &seen} }))
	id := grain.NewID("hooked", "a")
	a := p.activate(p.s.kinds["hooked"], id, id.Hash())
	a.g = &reasonGrain{seen: &seen}
	require.NoError(t, a.Transition(activation.Active))

	p.restart(a, 0)                      // the directive, as finish carries it out
	p.halt(a, grain.DeactivationStopped) // a Stop, before the hook's turn
	p.beginDeactivate(w, a)              // the hook's turn, on this goroutine
	require.Equal(t, grain.DeactivationFailed, seen)
	require.Equal(t, activation.Gone, a.State(), "stopped: gone, not restarted")
}

// builtGrain counts the instances its factory builds and the OnActivates
// they run.
type builtGrain struct{ activated *int }

func (g *builtGrain) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

func (g *builtGrain) OnActivate(context.Context, *grain.Context) error {
	*g.activated++
	return nil
}

// A Stop read after a restart has readied the fresh instance, before its
// activation turn — in the same round of the owner: the failed turn's
// finish, then the Stop — stops the grain without building the instance:
// no factory, no OnActivate loading state for nothing, no OnDeactivate;
// what waited for it is a dead letter (halt), and the next message
// activates a fresh one. Until the seventy-fourth session the instance
// was built, activated and at once deactivated, reason stopped.
func TestAStopBeforeARestartsActivationTurnBuildsNoInstance(t *testing.T) {
	p, w := ownedPartition(t, t.Context(), Config{})
	p.base = t.Context()
	var built, activated int
	require.NoError(t, Register(p.s, "built", func(grain.ID) *builtGrain { built++; return &builtGrain{activated: &activated} }))
	id := grain.NewID("built", "a")
	a := p.activate(p.s.kinds["built"], id, id.Hash())
	a.g = &builtGrain{activated: &activated}
	require.NoError(t, a.Transition(activation.Active))

	p.restart(a, 0) // no OnDeactivate: the fresh instance is readied at once
	require.Equal(t, activation.Activating, a.State())
	p.halt(a, grain.DeactivationStopped) // the Stop, read before the activation turn
	p.advance(w, a)
	require.Zero(t, built, "no instance built for a grain stopped before it was")
	require.Zero(t, activated)
	require.Equal(t, activation.Gone, a.State())
	_, ok := p.dir.Get(id, id.Hash())
	require.False(t, ok, "out of the directory: the next message activates a fresh instance")
}
