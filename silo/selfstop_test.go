package silo_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// admin stops the silo it runs in, as a service's admin grain might.
type admin struct {
	deactivated *atomic.Int32
}

type (
	shutdownWith struct {
		s   *silo.Silo
		ctx func(turn context.Context) (context.Context, context.CancelFunc)
	}
	closeSilo struct{ s *silo.Silo }
)

func (a *admin) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case shutdownWith:
		c, cancel := m.ctx(ctx)
		defer cancel()
		return nil, m.s.Shutdown(c)
	case closeSilo:
		return nil, m.s.Close()
	}
	return nil, errors.New("admin: unknown message")
}

func (a *admin) OnDeactivate(context.Context, *grain.Context) error {
	a.deactivated.Add(1)
	return nil
}

// ended fails the test if the silo has not stopped within a generous bound:
// a stop that waits for the turn that called it never ends.
func ended(t *testing.T, s *silo.Silo) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the silo never stopped")
	}
}

func TestShutdownFromATurnBeginsAndDoesNotWaitForItself(t *testing.T) {
	for name, mk := range map[string]func(turn context.Context) (context.Context, context.CancelFunc){
		"turn ctx":       func(turn context.Context) (context.Context, context.CancelFunc) { return turn, func() {} },
		"background ctx": func(context.Context) (context.Context, context.CancelFunc) { return context.Background(), func() {} },
		"derived ctx":    func(turn context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(turn) },
	} {
		t.Run(name, func(t *testing.T) {
			var deactivated atomic.Int32
			s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "admin", func(grain.ID) *admin { return &admin{&deactivated} }))
				require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
			})
			ctx := ctxT(t)
			_, err := silo.Call[int](ctx, s, grain.NewID("counter", "a"), incr{1})
			require.NoError(t, err)

			_, err = s.Ask(ctx, grain.NewID("admin", "root"), shutdownWith{s, mk})
			require.ErrorIs(t, err, silo.ErrShutdownFromTurn, "the handler's error reaches its caller: the shutdown let the turn finish")
			ended(t, s)
			assert.Equal(t, int32(1), deactivated.Load(), "graceful: the calling grain was deactivated after its turn")
			assert.Equal(t, 0, s.Stats().Activations["counter"], "and so was every other grain")
			require.ErrorIs(t, s.Tell(ctx, grain.NewID("counter", "a"), incr{1}), silo.ErrSiloClosed)
			require.NoError(t, s.Shutdown(ctx), "a second Shutdown from outside finds it stopped")
		})
	}
}

func TestShutdownFromATurnHonoursItsDeadline(t *testing.T) {
	var deactivated atomic.Int32
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "admin", func(grain.ID) *admin { return &admin{&deactivated} }))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	ctx := ctxT(t)
	release := make(chan struct{})
	defer close(release)
	require.NoError(t, s.Tell(ctx, grain.NewID("counter", "deaf"), hold{release})) // ignores ctx: a graceful stop cannot finish

	deadline := func(turn context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(turn, 50*time.Millisecond)
	}
	err := s.Tell(ctx, grain.NewID("admin", "root"), shutdownWith{s, deadline})
	require.NoError(t, err)
	ended(t, s) // at the deadline the silo closes, as Shutdown would
}

func TestCloseFromATurnDoesNotWaitForItself(t *testing.T) {
	var deactivated atomic.Int32
	// With a grace this long, a Close that waited for its own turn would
	// outlast the test.
	s := newSilo(t, silo.Config{DeactivationTimeout: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "admin", func(grain.ID) *admin { return &admin{&deactivated} }))
	})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("admin", "root"), closeSilo{s})
	require.ErrorIs(t, err, silo.ErrSiloClosed, "Close fails the asks being handled, its own caller's too")
	ended(t, s)
	assert.Zero(t, deactivated.Load(), "Close runs no OnDeactivate")
}

// A turn stopping another silo: the stack cannot tell whose turn it is, so
// that stop is not waited for either; a silo never started, or stopped
// already, has nothing to wait for.
func TestShutdownOfAnotherSiloFromATurn(t *testing.T) {
	var deactivated atomic.Int32
	other := newSilo(t, silo.Config{}, nil)
	idle, err := silo.New(silo.Config{})
	require.NoError(t, err)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "admin", func(grain.ID) *admin { return &admin{&deactivated} }))
	})
	ctx := ctxT(t)
	background := func(context.Context) (context.Context, context.CancelFunc) { return context.Background(), func() {} }

	_, err = s.Ask(ctx, grain.NewID("admin", "root"), shutdownWith{other, background})
	require.ErrorIs(t, err, silo.ErrShutdownFromTurn)
	ended(t, other)
	_, err = s.Ask(ctx, grain.NewID("admin", "root"), shutdownWith{other, background})
	require.NoError(t, err, "stopped already")
	_, err = s.Ask(ctx, grain.NewID("admin", "root"), shutdownWith{idle, background})
	require.NoError(t, err, "never started")
	ended(t, idle)
	_, err = silo.Call[int](ctx, s, grain.NewID("admin", "root"), "still here?")
	require.Error(t, err, "the calling silo runs on")
	require.NotErrorIs(t, err, silo.ErrSiloClosed)
}

// Stops from turns racing stops from outside: the silo stops, and soon. A
// Close from outside once held the silo's lock while it waited for the
// turns — among them one blocked in a Close of its own that needed the lock
// — for all of DeactivationTimeout.
func TestStopsFromTurnsRacingStopsFromOutside(t *testing.T) {
	for range 50 {
		// With a grace this long, a stop waiting for a turn that waits for
		// it would outlast the test.
		s, err := silo.New(silo.Config{DeactivationTimeout: time.Hour})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "admin", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch msg {
				case "shutdown":
					return nil, s.Shutdown(ctx)
				case "close":
					return nil, s.Close()
				}
				return nil, nil
			}
		}))
		require.NoError(t, s.Start())
		ctx := ctxT(t)
		var wg sync.WaitGroup
		for k := range 4 {
			wg.Go(func() { _, _ = s.Ask(ctx, grain.NewIntID("admin", int64(k)), "shutdown") })
			wg.Go(func() { _, _ = s.Ask(ctx, grain.NewIntID("admin", int64(k+10)), "close") })
			wg.Go(func() { _ = s.Tell(ctx, grain.NewIntID("admin", int64(k+20)), "hello") })
		}
		wg.Go(func() { _ = s.Shutdown(ctx) })
		wg.Go(func() { _ = s.Close() })
		all := make(chan struct{})
		go func() { wg.Wait(); close(all) }()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			t.Fatal("a stop never returned")
		}
		ended(t, s)
	}
}
