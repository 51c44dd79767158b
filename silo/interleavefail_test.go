package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// waiter counts its turns; "wait" calls a gated grain, "boom" panics.
type waiter struct{ n int }

func (g *waiter) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	g.n++
	switch msg {
	case "wait":
		_, err := silo.Call[string](ctx, c.Silo(), grain.NewID("gated", "g"), "x")
		return g.n, err
	case "boom":
		panic("interleaved")
	}
	return g.n, nil
}

type gated struct {
	in   chan<- struct{}
	gate <-chan struct{}
}

func (g gated) Receive(context.Context, *grain.Context, any) (any, error) {
	g.in <- struct{}{}
	<-g.gate
	return "ok", nil
}

// A turn of a reentrant grain that fails while another of its turns waits
// in a call is supervised like any failed turn, once the waiting turn has
// ended: the instance cannot be dropped from under a running turn. The
// failure was once forgotten, the broken instance kept for good.
func TestFailureOfAnInterleavedTurnIsSupervised(t *testing.T) {
	for name, c := range map[string]struct {
		decider  activation.Decider
		restarts uint64
		stops    uint64
	}{
		"restart (default)": {restarts: 1},
		"stop":              {decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive { return activation.Stop }), stops: 1},
	} {
		t.Run(name, func(t *testing.T) {
			in, gate := make(chan struct{}), make(chan struct{})
			s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "waiter", func(grain.ID) *waiter { return &waiter{} },
					silo.WithReentrant(), silo.WithSupervision(activation.Supervision{Decider: c.decider})))
				require.NoError(t, silo.Register(s, "gated", func(grain.ID) gated { return gated{in: in, gate: gate} }))
			})
			ctx := ctxT(t)
			id := grain.NewID("waiter", "w")
			waited := make(chan int, 1)
			go func() {
				n, err := silo.Call[int](ctx, s, id, "wait")
				assert.NoError(t, err)
				waited <- n
			}()
			<-in // the first turn (the activation's) waits in its call
			_, err := s.Ask(ctx, id, "boom")
			require.ErrorIs(t, err, grain.ErrPanic)
			assert.Zero(t, s.Stats().Restarts+s.Stats().Stops, "not while a turn waits")
			close(gate)
			assert.Equal(t, 2, <-waited, "the waiting turn finishes on the instance it began on")

			n, err := silo.Call[int](ctx, s, id, "get")
			st := s.Stats()
			assert.Equal(t, c.restarts, st.Restarts)
			assert.Equal(t, c.stops, st.Stops)
			if c.stops > 0 {
				require.ErrorIs(t, err, grain.ErrGrainStopped)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 1, n, "a fresh instance")
		})
	}
}
