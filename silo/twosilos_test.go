package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Two silos in one process each host their own grain of every ID. A call
// chain that passes from one to the other must tell them apart: a grain
// calling its namesake on the other silo closes no cycle, while a chain that
// comes back to a grain still waiting on its own silo does.

// route is a call routed through silos: each grain calls the next stop's grain
// on the next stop's silo, and answers with how many grains answered.
type route struct {
	stops []stop
	allow bool // call with AllowCallChainReentrancy
}

type stop struct {
	silo int
	id   grain.ID
}

type router struct{ silos *[2]*silo.Silo }

func (g *router) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	m := msg.(route)
	if len(m.stops) == 0 {
		return 1, nil
	}
	next := m.stops[0]
	if m.allow {
		ctx = silo.AllowCallChainReentrancy(ctx)
	}
	n, err := silo.Call[int](ctx, g.silos[next.silo], next.id, route{stops: m.stops[1:], allow: m.allow})
	return n + 1, err
}

func twoSilos(t *testing.T) *[2]*silo.Silo { return twoSilosNamed(t, "a", "b") }

func twoSilosNamed(t *testing.T, names ...string) *[2]*silo.Silo {
	var silos [2]*silo.Silo
	for i, name := range names {
		silos[i] = newSilo(t, silo.Config{Name: name}, func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "router", func(grain.ID) *router { return &router{silos: &silos} }))
		})
	}
	return &silos
}

func TestAGrainCallingItsNamesakeOnAnotherSiloClosesNoCycle(t *testing.T) {
	silos := twoSilos(t)
	ctx := ctxT(t)
	x, y := grain.NewID("router", "x"), grain.NewID("router", "y")

	// a's x calls b's x, which calls b's y, which calls a's y.
	n, err := silo.Call[int](ctx, silos[0], x, route{stops: []stop{{1, x}, {1, y}, {0, y}}})
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

func TestACycleThroughTwoSilosFailsAtOnce(t *testing.T) {
	silos := twoSilos(t)
	ctx := ctxT(t) // the call would otherwise wait for its deadline
	x, y := grain.NewID("router", "x"), grain.NewID("router", "y")

	for name, stops := range map[string][]stop{
		"back to the caller": {{1, y}, {0, x}},
		"through namesakes":  {{1, x}, {0, x}},
	} {
		_, err := silo.Call[int](ctx, silos[0], x, route{stops: stops})
		require.ErrorIs(t, err, grain.ErrCallCycle, name)
		var cycle *grain.CallCycleError
		require.ErrorAs(t, err, &cycle, name)
		assert.Equal(t, []grain.ID{x, stops[0].id, x}, cycle.Chain, name)
		assert.Equal(t, []string{"a", "b", "a"}, cycle.Silos, name)
		assert.ErrorContains(t, err, "router/x (silo a) -> router/"+stops[0].id.Key()+" (silo b) -> router/x (silo a)", name)
	}

	// Allowed to, the chain re-enters a's x through b.
	n, err := silo.Call[int](ctx, silos[0], x, route{stops: []stop{{1, x}, {0, x}}, allow: true})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

// Two silos of one name (the default's, say) are still told apart in a
// cycle's error.
func TestACycleThroughTwoSilosOfOneNameNamesThemApart(t *testing.T) {
	silos := twoSilosNamed(t, "", "")
	x := grain.NewID("router", "x")
	_, err := silo.Call[int](ctxT(t), silos[0], x, route{stops: []stop{{1, x}, {0, x}}})
	var cycle *grain.CallCycleError
	require.ErrorAs(t, err, &cycle)
	assert.Equal(t, []string{"local", "local#2", "local"}, cycle.Silos)
}

// senderOf answers with the sender its message names, if any.
type senderOf struct{}

func (senderOf) Receive(_ context.Context, gc *grain.Context, msg any) (any, error) {
	id, ok := gc.Sender()
	if !ok {
		return "none", nil
	}
	return id.String(), nil
}

// relayTo asks or tells the grain of its silo, from its turn.
type relayTo struct {
	s    *silo.Silo
	id   grain.ID
	tell chan any // where the told grain's answer goes, for a tell
}

func TestAnotherSilosGrainIsNoSender(t *testing.T) {
	told := make(chan any, 1)
	b := newSilo(t, silo.Config{Name: "b"}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "whom", func(grain.ID) senderOf { return senderOf{} }))
		require.NoError(t, silo.Register(s, "told", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				v, _ := senderOf{}.Receive(ctx, gc, msg)
				told <- v
				return nil, nil
			}
		}))
	})
	a := newSilo(t, silo.Config{Name: "a"}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "whom", func(grain.ID) senderOf { return senderOf{} }))
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				m := msg.(relayTo)
				if m.tell != nil {
					return nil, m.s.Tell(ctx, m.id, "who?")
				}
				return m.s.Ask(ctx, m.id, "who?")
			}
		}))
	})
	ctx := ctxT(t)
	relay := grain.NewID("relay", "r")

	// Its own silo's grain names the relay; the other silo's does not,
	// since a reply told to relay/r there would reach b's relay/r.
	got, err := silo.Call[string](ctx, a, relay, relayTo{s: a, id: grain.NewID("whom", "w")})
	require.NoError(t, err)
	assert.Equal(t, "relay/r", got)
	got, err = silo.Call[string](ctx, a, relay, relayTo{s: b, id: grain.NewID("whom", "w")})
	require.NoError(t, err)
	assert.Equal(t, "none", got)

	_, err = a.Ask(ctx, relay, relayTo{s: b, id: grain.NewID("told", "t"), tell: told})
	require.NoError(t, err)
	assert.Equal(t, "none", <-told)
}
