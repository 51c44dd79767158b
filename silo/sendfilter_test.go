package silo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// sendLog is a send filter that records every send it sees, and what came
// of it.
type sendLog struct {
	mu    sync.Mutex
	sends []string
}

func (l *sendLog) Send(ctx context.Context, s grain.Send, next grain.SendNext) (any, error) {
	reply, err := next(ctx, s)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sends = append(l.sends, fmt.Sprintf("%v->%v ask=%v msg=%v reply=%v err=%v", s.From, s.To, s.Ask, s.Msg, reply, err))
	return reply, err
}

func (l *sendLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sends)
}

// sendRelay, on "go", tells its echo, asks it, and notifies an observer —
// each through its Context's Silo.
type sendRelay struct{ watchers grain.Observers }

type relayGo struct{ watcher grain.ID }

func (r *sendRelay) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case relayGo:
		echo := grain.NewID("echo", c.ID().Key())
		if err := c.Silo().Tell(ctx, echo, "told"); err != nil {
			return nil, err
		}
		v, err := silo.Call[string](ctx, c.Silo(), echo, "asked")
		if err != nil {
			return nil, err
		}
		r.watchers.Subscribe(m.watcher)
		return v, r.watchers.Notify(ctx, c.Silo(), "news")
	}
	return nil, nil
}

func echoKind(s *silo.Silo) error {
	return silo.Register(s, "echo", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) { return fmt.Sprint("echo ", msg), nil }
	})
}

func sendFilteredSilo(t *testing.T, fs ...grain.SendFilter) *silo.Silo {
	return newSilo(t, silo.Config{SendFilters: fs}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) *sendRelay { return &sendRelay{} }))
		require.NoError(t, echoKind(s))
	})
}

// Send filters run around every send a grain makes through its Context's
// Silo — a Tell, an Ask (silo.Call), an observer's notification — naming
// the grain as its sender, and around those made through Silo.Runtime from
// outside; the Silo's own Tell and Ask are not filtered.
func TestSendFiltersRunAroundAGrainsSends(t *testing.T) {
	log := &sendLog{}
	s := sendFilteredSilo(t, log)
	ctx := ctxT(t)
	obs, err := s.NewObserver(4)
	require.NoError(t, err)
	defer obs.Close()

	v, err := s.Ask(ctx, grain.NewID("relay", "a"), relayGo{obs.ID()}) // the Silo's own: not filtered
	require.NoError(t, err)
	assert.Equal(t, "echo asked", v)
	n, err := obs.Receive(ctx)
	require.NoError(t, err)
	assert.Equal(t, "news", n.Msg)
	assert.Equal(t, []string{
		"relay/a->echo/a ask=false msg=told reply=<nil> err=<nil>",
		"relay/a->echo/a ask=true msg=asked reply=echo asked err=<nil>",
		fmt.Sprintf("relay/a->%v ask=false msg=news reply=<nil> err=<nil>", obs.ID()),
	}, log.all())

	v, err = s.Runtime().Ask(ctx, grain.NewID("echo", "b"), "outside")
	require.NoError(t, err)
	assert.Equal(t, "echo outside", v)
	assert.Equal(t, "->echo/b ask=true msg=outside reply=echo outside err=<nil>", log.all()[3], "from outside any grain: no sender")
	require.NoError(t, s.Tell(ctx, grain.NewID("echo", "b"), "unfiltered"))
	assert.Len(t, log.all(), 4, "the Silo's own Tell is not filtered")
}

// The first filter is outermost; a filter may give the send a ctx of its
// own — an ask's handler runs under it — or refuse it: nothing is sent,
// no dead letter, and the sender gets the filter's error.
func TestSendFiltersOrderCtxAndRefusal(t *testing.T) {
	type tagKey struct{}
	var order []string
	var mu sync.Mutex
	named := func(name string) grain.SendFilter {
		return grain.SendFilterFunc(func(ctx context.Context, m grain.Send, next grain.SendNext) (any, error) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return next(ctx, m)
		})
	}
	errNo := errors.New("not to the vault")
	guard := grain.SendFilterFunc(func(ctx context.Context, m grain.Send, next grain.SendNext) (any, error) {
		if m.To.Kind() == "vault" {
			return nil, errNo
		}
		return next(context.WithValue(ctx, tagKey{}, "tagged"), m)
	})
	got := make(chan any, 1)
	s := newSilo(t, silo.Config{SendFilters: []grain.SendFilter{named("outer"), named("inner"), guard}}, func(s *silo.Silo) {
		for _, kind := range []string{"tagged", "vault"} {
			require.NoError(t, silo.Register(s, kind, func(grain.ID) grain.Func {
				return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
					got <- ctx.Value(tagKey{})
					return nil, nil
				}
			}))
		}
	})
	ctx := ctxT(t)
	_, err := s.Runtime().Ask(ctx, grain.NewID("tagged", "x"), "hi")
	require.NoError(t, err)
	assert.Equal(t, "tagged", <-got, "the ask's handler runs under the filter's ctx")
	assert.Equal(t, []string{"outer", "inner"}, order)

	err = s.Runtime().Tell(ctx, grain.NewID("vault", "v"), "open")
	require.ErrorIs(t, err, errNo)
	_, err = s.Runtime().Ask(ctx, grain.NewID("vault", "v"), "open")
	require.ErrorIs(t, err, errNo)
	assert.Zero(t, s.Stats().Activations["vault"], "nothing was sent")
	assert.Empty(t, s.Stats().DeadLetters, "a refused send is no dead letter")
}

// A filter's panic fails the send with a *grain.PanicError, from a turn
// as from outside; the sender goes on, and so does the silo.
func TestASendFiltersPanicFailsTheSend(t *testing.T) {
	boom := grain.SendFilterFunc(func(ctx context.Context, m grain.Send, next grain.SendNext) (any, error) {
		if m.Msg == "boom" {
			panic("filter bug")
		}
		return next(ctx, m)
	})
	s := newSilo(t, silo.Config{SendFilters: []grain.SendFilter{boom}}, func(s *silo.Silo) {
		require.NoError(t, echoKind(s))
		require.NoError(t, silo.Register(s, "caller", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				_, err := c.Silo().Ask(ctx, grain.NewID("echo", "e"), msg)
				return "went on", err
			}
		}))
	})
	ctx := ctxT(t)
	_, err := s.Runtime().Ask(ctx, grain.NewID("echo", "e"), "boom")
	var pe *grain.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "filter bug", pe.Value)
	_, err = s.Ask(ctx, grain.NewID("caller", "c"), "boom")
	require.ErrorIs(t, err, grain.ErrPanic, "the grain's ask failed; the grain returned its error")
	v, err := s.Ask(ctx, grain.NewID("caller", "c"), "fine")
	require.NoError(t, err)
	assert.Equal(t, "went on", v)
	assert.Zero(t, s.Stats().Restarts, "the filter's panic was no panic of the grain")
}

type sendFilterKey struct{}

// A send through the filters keeps its turn: a call cycle through them is
// still found at once, and a nil ctx is refused before any filter sees it.
func TestSendFiltersKeepTheTurn(t *testing.T) {
	pass := grain.SendFilterFunc(func(ctx context.Context, m grain.Send, next grain.SendNext) (any, error) {
		return next(context.WithValue(ctx, sendFilterKey{}, 1), m) // a ctx derived from the turn's
	})
	s := newSilo(t, silo.Config{SendFilters: []grain.SendFilter{pass}}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ping", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				return c.Silo().Ask(ctx, grain.NewID("pong", "p"), msg)
			}
		}))
		require.NoError(t, silo.Register(s, "pong", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				return c.Silo().Ask(ctx, grain.NewID("ping", "p"), msg)
			}
		}))
	})
	_, err := s.Ask(ctxT(t), grain.NewID("ping", "p"), "x")
	require.ErrorIs(t, err, grain.ErrCallCycle)
	var nilCtx context.Context
	_, err = s.Runtime().Ask(nilCtx, grain.NewID("ping", "p"), "x")
	require.ErrorIs(t, err, grain.ErrNilContext)
}

// Without send filters Runtime is the Silo itself; a nil one is refused
// by New.
func TestRuntimeAndNilSendFilters(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()
	assert.Same(t, s, s.Runtime())
	_, err = silo.New(silo.Config{SendFilters: []grain.SendFilter{&sendLog{}, nil}})
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "SendFilters[1]")
	var zero silo.Silo
	require.ErrorIs(t, zero.Runtime().Tell(context.Background(), grain.NewID("a", "b"), 1), grain.ErrSiloClosed)
}
