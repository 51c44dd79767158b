package silo_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// quitter ends its goroutine with runtime.Goexit where told to, as a
// handler under test does when a require.* assertion in it fails.
type quitter struct{}

type (
	quitNow       struct{}
	quitAfterCall struct{}
	callAway      struct{ started, gate chan struct{} } // waits in a call to signalWait
	signalWait    struct{ started, gate chan struct{} }
)

func (q *quitter) OnActivate(_ context.Context, c *grain.Context) error {
	if c.ID().Key() == "in-activate" {
		runtime.Goexit()
	}
	return nil
}

func (q *quitter) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case quitNow:
		runtime.Goexit()
	case quitAfterCall: // off its partition by then: the call handed it off
		if _, err := silo.Call[int](ctx, c.Silo(), grain.NewID("counter", "x"), get{}); err != nil {
			return nil, err
		}
		runtime.Goexit()
	case callAway:
		return silo.Call[string](ctx, c.Silo(), grain.NewID("quit", "waiter"), signalWait(m))
	case signalWait:
		close(m.started)
		<-m.gate
		return "done", nil
	case get:
		return "alive", nil
	}
	return nil, errors.New("quitter: unknown message")
}

// A handler that calls runtime.Goexit fails its turn as a panic would: the
// caller hears at once, supervision restarts the grain, the partition goes
// on, and a graceful shutdown completes.
func TestGoexitInAHandlerFailsTheTurn(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "quit", func(grain.ID) *quitter { return &quitter{} }))
		require.NoError(t, silo.Register(s, "reentrant", func(grain.ID) *quitter { return &quitter{} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	ctx := ctxT(t)
	isGoexit := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, grain.ErrPanic)
		require.ErrorIs(t, err, silo.ErrGoexit)
	}

	t.Run("in a turn on its partition", func(t *testing.T) {
		id := grain.NewID("quit", "a")
		_, err := s.Ask(ctx, id, quitNow{})
		isGoexit(t, err)
		v, err := s.Ask(ctx, id, get{})
		require.NoError(t, err, "restarted, as after a panic")
		assert.Equal(t, "alive", v)
	})
	t.Run("in a turn handed off by a call", func(t *testing.T) {
		_, err := s.Ask(ctx, grain.NewID("quit", "b"), quitAfterCall{})
		isGoexit(t, err)
	})
	t.Run("in OnActivate", func(t *testing.T) {
		_, err := s.Ask(ctx, grain.NewID("quit", "in-activate"), get{})
		require.ErrorIs(t, err, grain.ErrActivation)
		isGoexit(t, err)
	})
	t.Run("in an interleaved turn", func(t *testing.T) {
		id := grain.NewID("reentrant", "r")
		started, gate := make(chan struct{}), make(chan struct{})
		first := make(chan any, 1)
		go func() { v, _ := s.Ask(ctx, id, callAway{started, gate}); first <- v }()
		<-started // its turn now waits in a call: the next message interleaves
		_, err := s.Ask(ctx, id, quitNow{})
		isGoexit(t, err) // answered while the first turn still waits: it interleaved
		close(gate)
		assert.Equal(t, "done", <-first, "the waiting turn got its token back and finished")
		v, err := s.Ask(ctx, id, get{})
		require.NoError(t, err)
		assert.Equal(t, "alive", v)
	})
	n, err := silo.Call[int](ctx, s, grain.NewID("counter", "y"), incr{1})
	require.NoError(t, err, "the partition still serves its other grains")
	assert.Equal(t, 1, n)
	require.NoError(t, s.Shutdown(ctx), "and a graceful shutdown waits for no lost turn")
}
