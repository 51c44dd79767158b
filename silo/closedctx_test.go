package silo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// closeWatcher is a grain whose "watch" turn waits for its ctx to end,
// then tries every way a turn reaches the silo and reports what each
// returned; its "hold" turn waits for its ctx and returns its error.
type closeWatcher struct {
	s       *silo.Silo
	waiting chan struct{} // closed once the watch turn waits
	errs    chan error
}

type (
	watchEnd    struct{ call bool } // call: wait in a call to a held grain instead
	holdTillEnd struct{}
)

func (g *closeWatcher) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	other := grain.NewID("counter", "x")
	switch m := msg.(type) {
	case holdTillEnd:
		<-ctx.Done()
		return nil, ctx.Err()
	case watchEnd:
		if m.call {
			close(g.waiting)
			_, err := g.s.Ask(ctx, grain.NewID("watcher", "held"), holdTillEnd{})
			g.errs <- err
			return nil, nil
		}
		close(g.waiting)
		<-ctx.Done()
		_, err := g.s.Ask(ctx, other, get{})
		g.errs <- err
		g.errs <- g.s.Tell(ctx, other, incr{1})
		derived, cancel := context.WithCancel(ctx)
		defer cancel()
		_, err = silo.Call[int](derived, g.s, other, get{})
		g.errs <- err
		_, err = g.s.ActiveGrains(ctx, "counter")
		g.errs <- err
		close(g.errs)
	}
	return nil, nil
}

func watcherSilo(t *testing.T) (*silo.Silo, *closeWatcher) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	g := &closeWatcher{s: s, waiting: make(chan struct{}), errs: make(chan error, 8)}
	require.NoError(t, silo.Register(s, "watcher", func(grain.ID) *closeWatcher { return g }))
	require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	require.NoError(t, s.Start())
	t.Cleanup(func() { s.Close() })
	return s, g
}

// Close ends every turn's ctx; what the turn sends then fails with
// ErrSiloClosed, as a caller's outside the silo does — not with a bare
// context.Canceled, which says a caller gave up. The error still matches
// the ctx's. So it is for a ctx derived from the turn's, for a call
// waiting as the silo closes, for a Shutdown whose ctx ends, and for a
// turn's sends to another silo's grains as its own closes. A turn's ctx
// that ended because its caller left says only that.
func TestATurnsSendsFailWithErrSiloClosedOnceItsSiloCloses(t *testing.T) {
	closedToo := func(t *testing.T, err error) {
		t.Helper()
		assert.ErrorIs(t, err, silo.ErrSiloClosed)
		assert.ErrorIs(t, err, context.Canceled)
	}
	allClosedToo := func(t *testing.T, errs <-chan error) { // the watch turn's four
		t.Helper()
		n := 0
		for err := range errs {
			closedToo(t, err)
			n++
		}
		assert.Equal(t, 4, n)
	}
	t.Run("sends after the turn's ctx ended", func(t *testing.T) {
		s, g := watcherSilo(t)
		require.NoError(t, s.Tell(ctxT(t), grain.NewID("watcher", "a"), watchEnd{}))
		<-g.waiting
		s.Close()
		allClosedToo(t, g.errs)
	})
	t.Run("sends to another silo's grains", func(t *testing.T) {
		s, g := watcherSilo(t)
		g.s = newSilo(t, silo.Config{}, nil) // its turns send there: the turn's silo closes, not theirs
		require.NoError(t, s.Tell(ctxT(t), grain.NewID("watcher", "a"), watchEnd{}))
		<-g.waiting
		s.Close()
		allClosedToo(t, g.errs)
	})
	t.Run("a call waiting", func(t *testing.T) {
		s, g := watcherSilo(t)
		require.NoError(t, s.Tell(ctxT(t), grain.NewID("watcher", "a"), watchEnd{call: true}))
		<-g.waiting
		s.Close()
		assert.ErrorIs(t, <-g.errs, silo.ErrSiloClosed)
	})
	t.Run("a Shutdown whose ctx ends", func(t *testing.T) {
		s, g := watcherSilo(t)
		require.NoError(t, s.Tell(ctxT(t), grain.NewID("watcher", "a"), watchEnd{}))
		<-g.waiting
		ended, cancel := context.WithCancel(ctxT(t))
		cancel()
		assert.ErrorIs(t, s.Shutdown(ended), context.Canceled)
		for err := range g.errs {
			closedToo(t, err)
		}
	})
	t.Run("the caller left, the silo runs", func(t *testing.T) {
		s, g := watcherSilo(t)
		ctx, leave := context.WithCancel(ctxT(t))
		asked := make(chan error, 1)
		go func() {
			_, err := s.Ask(ctx, grain.NewID("watcher", "a"), watchEnd{})
			asked <- err
		}()
		<-g.waiting
		leave()
		assert.ErrorIs(t, <-asked, context.Canceled)
		n := 0
		for err := range g.errs {
			assert.ErrorIs(t, err, context.Canceled)
			assert.False(t, errors.Is(err, silo.ErrSiloClosed), "%v", err)
			n++
		}
		assert.Equal(t, 4, n)
	})
}
