package silo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// tagging is a filter that writes its name before and after the rest of
// the turn, and wraps the reply in its name.
func tagging(j *journal, name string) grain.Filter {
	return grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		j.add("%s> %v %v", name, c.ID(), msg)
		r, err := next.Receive(ctx, c, msg)
		j.add("%s<", name)
		if s, ok := r.(string); ok {
			r = name + "(" + s + ")"
		}
		return r, err
	})
}

// trailed is a grain that records its messages and hooks.
type trailed struct {
	j *journal
	n int
}

type (
	say       struct{ s string }
	startTick struct{ every time.Duration }
)

func (g *trailed) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	g.n++
	g.j.add("grain %v %v", c.ID(), msg)
	switch m := msg.(type) {
	case say:
		return m.s, nil
	case startTick:
		return nil, c.StartTimer("t", m.every, m.every, "tick")
	case boom:
		panic(m.v)
	}
	return g.n, nil
}

func (g *trailed) OnActivate(context.Context, *grain.Context) error {
	g.j.add("activate")
	return nil
}

func (g *trailed) OnDeactivate(context.Context, *grain.Context) error {
	g.j.add("deactivate")
	return nil
}

func filteredSilo(t *testing.T, j *journal, cfg silo.Config, opts ...silo.KindOption) *silo.Silo {
	t.Helper()
	return newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "j", func(grain.ID) *trailed { return &trailed{j: j} }, opts...))
		require.NoError(t, silo.Register(s, "plain", func(grain.ID) *trailed { return &trailed{j: j} }))
	})
}

// The silo's filters run outermost, then the kind's, then the grain; each
// sees the message on the way in and can change the reply on the way out.
// An activation's first message is filtered like any other, once
// OnActivate has run; OnActivate is not.
func TestFiltersRunAroundEveryMessageTurnInOrder(t *testing.T) {
	j := newJournal()
	s := filteredSilo(t, j, silo.Config{Filters: []grain.Filter{tagging(j, "silo")}},
		silo.WithFilters(tagging(j, "kind1")), silo.WithFilters(tagging(j, "kind2")))
	ctx := ctxT(t)
	id := grain.NewID("j", "a")

	for range 2 { // the activation's first message, then one to the active grain
		r, err := silo.Call[string](ctx, s, id, say{"hi"})
		require.NoError(t, err)
		require.Equal(t, "silo(kind1(kind2(hi)))", r)
	}
	want := []string{"silo> j/a {hi}", "kind1> j/a {hi}", "kind2> j/a {hi}", "grain j/a {hi}", "kind2<", "kind1<", "silo<"}
	require.Equal(t, append([]string{"activate"}, append(want, want...)...), j.take())

	// Another kind gets the silo's filters alone.
	r, err := silo.Call[string](ctx, s, grain.NewID("plain", "b"), say{"yo"})
	require.NoError(t, err)
	require.Equal(t, "silo(yo)", r)
	require.Equal(t, []string{"activate", "silo> plain/b {yo}", "grain plain/b {yo}", "silo<"}, j.take())
}

// A filter that returns without calling next refuses the message: the
// grain never sees it, and the ask gets the filter's error.
func TestAFilterCanRefuseAMessage(t *testing.T) {
	j := newJournal()
	errDenied := errors.New("denied")
	auth := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		if m, ok := msg.(say); ok && strings.HasPrefix(m.s, "admin") {
			return nil, errDenied
		}
		return next.Receive(ctx, c, msg)
	})
	s := filteredSilo(t, j, silo.Config{}, silo.WithFilters(auth))
	ctx := ctxT(t)
	id := grain.NewID("j", "a")

	_, err := s.Ask(ctx, id, say{"admin: drop tables"})
	require.ErrorIs(t, err, errDenied)
	r, err := silo.Call[string](ctx, s, id, say{"hello"})
	require.NoError(t, err)
	require.Equal(t, "hello", r)
	require.Equal(t, []string{"activate", "grain j/a {hello}"}, j.take())
}

// A filter runs inside the turn: its panic is the turn's, reaching the
// caller as a *grain.PanicError and restarting the grain under the kind's
// supervision.
func TestAFilterPanicIsTheTurns(t *testing.T) {
	j := newJournal()
	panicky := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		if msg == "filter panics" {
			panic("in the filter")
		}
		return next.Receive(ctx, c, msg)
	})
	s := filteredSilo(t, j, silo.Config{}, silo.WithFilters(panicky))
	ctx := ctxT(t)
	id := grain.NewID("j", "a")

	for want := range 3 {
		n, err := silo.Call[int](ctx, s, id, "count")
		require.NoError(t, err)
		require.Equal(t, want+1, n)
	}
	_, err := s.Ask(ctx, id, "filter panics")
	var pe *grain.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "in the filter", pe.Value)
	n, err := silo.Call[int](ctx, s, id, "count")
	require.NoError(t, err)
	require.Equal(t, 1, n, "a fresh instance after the restart")
}

type spanKey struct{}

// What a filter passes on as ctx is the grain's ctx, and a call the grain
// makes with it carries its values to the grain called.
func TestAFiltersCtxReachesTheGrainAndItsCalls(t *testing.T) {
	span := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		return next.Receive(context.WithValue(ctx, spanKey{}, "span:"+c.ID().Key()), c, msg)
	})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				mine, _ := ctx.Value(spanKey{}).(string)
				theirs, err := silo.Call[string](ctx, c.Silo(), grain.NewID("reader", "r"), "read")
				return mine + " " + theirs, err
			}
		}, silo.WithFilters(span)))
		require.NoError(t, silo.Register(s, "reader", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				v, _ := ctx.Value(spanKey{}).(string)
				return "saw " + v, nil
			}
		}))
	})
	r, err := silo.Call[string](ctxT(t), s, grain.NewID("relay", "x"), "go")
	require.NoError(t, err)
	require.Equal(t, "span:x saw span:x", r)
}

// A timer's ticks are message turns, filtered like the others (with no
// sender); OnActivate and OnDeactivate are not.
func TestFiltersSeeTimerTicksAndNotTheHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := newJournal()
		senders := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
			_, has := c.Sender()
			j.add("filter %v sender=%v", msg, has)
			return next.Receive(ctx, c, msg)
		})
		s, err := silo.New(silo.Config{Filters: []grain.Filter{senders}})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "j", func(grain.ID) *trailed { return &trailed{j: j} }))
		require.NoError(t, s.Start())

		require.NoError(t, s.Tell(t.Context(), grain.NewID("j", "a"), startTick{every: time.Second}))
		time.Sleep(2*time.Second + time.Millisecond) // the bubble's clock: two ticks fall due
		synctest.Wait()
		require.NoError(t, s.Shutdown(t.Context()))
		require.Equal(t, []string{
			"activate", "filter {1000000000} sender=false", "grain j/a {1000000000}",
			"filter tick sender=false", "grain j/a tick",
			"filter tick sender=false", "grain j/a tick",
			"deactivate",
		}, j.take())
	})
}

// Filters cost a filtered tell no allocation: the chain is the worker's,
// reused from turn to turn.
func TestAFilteredTellAllocatesNothing(t *testing.T) {
	pass := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		return next.Receive(ctx, c, msg)
	})
	s := newSilo(t, silo.Config{Partitions: 2, Filters: []grain.Filter{pass}}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }, silo.WithFilters(pass, pass)))
	})
	ctx := ctxT(t)
	ids := make([]grain.ID, 16)
	for i := range ids {
		ids[i] = grain.NewIntID("counter", int64(i))
		_, err := s.Ask(ctx, ids[i], get{}) // active, and a barrier
		require.NoError(t, err)
	}
	tell := func() {
		for _, id := range ids {
			if err := s.Tell(ctx, id, incr{1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tell()
	if a := testing.AllocsPerRun(100, tell); a != 0 {
		t.Errorf("%v allocations per %d filtered tells", a, len(ids))
	}
	for _, id := range ids { // every tell went through the three filters to the grain
		n, err := silo.Call[int](ctx, s, id, get{})
		require.NoError(t, err)
		require.Equal(t, 1+1+100, n, "the first tell, AllocsPerRun's warm-up, its runs")
	}
}

// A nil filter is refused: in Config by New, in WithFilters by Register.
// The Config's slice is the silo's own copy once New returns.
func TestNilFiltersAreRefused(t *testing.T) {
	var nilFunc grain.FilterFunc
	_, err := silo.New(silo.Config{Filters: []grain.Filter{nil}})
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	_, err = silo.New(silo.Config{Filters: []grain.Filter{nilFunc}})
	require.ErrorIs(t, err, grain.ErrInvalidConfig)

	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()
	err = silo.Register(s, "c", func(grain.ID) *counter { return &counter{} }, silo.WithFilters(nilFunc))
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	require.ErrorContains(t, err, "filter 0 is nil")
}

func TestConfigFiltersAreCopiedAtNew(t *testing.T) {
	j := newJournal()
	fs := []grain.Filter{tagging(j, "first")}
	s := filteredSilo(t, j, silo.Config{Filters: fs})
	fs[0] = tagging(j, "changed")
	r, err := silo.Call[string](ctxT(t), s, grain.NewID("plain", "a"), say{"x"})
	require.NoError(t, err)
	require.Equal(t, "first(x)", r)
}

type callWho struct{ target grain.ID }

// Filtered turns that run at once — turns handed off while they wait in
// calls, a reentrant grain's interleaved turns, callbacks on a call chain —
// each run their own grain through their own filters: a worker's chain is
// never shared by two turns.
func TestFilteredTurnsThatOverlapKeepTheirOwnGrain(t *testing.T) {
	check := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		r, err := next.Receive(ctx, c, msg)
		if s, ok := r.(string); ok && !strings.HasPrefix(s, c.ID().Key()+":") {
			return nil, fmt.Errorf("filter of %v got the reply %q", c.ID(), s)
		}
		return r, err
	})
	// A filter that waits in a call before it goes on: while it waits, other
	// turns run on the partition, filtered too.
	precall := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		if m, ok := msg.(callWho); ok {
			if _, err := c.Silo().Ask(silo.AllowCallChainReentrancy(ctx), m.target, "who"); err != nil {
				return nil, err
			}
		}
		return next.Receive(ctx, c, msg)
	})
	s := newSilo(t, silo.Config{Partitions: 2, HandoffThreshold: 20 * time.Microsecond, Filters: []grain.Filter{check}}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "r", func(id grain.ID) grain.Func {
			me := id.Key() + ":" // the instance's own: a turn run by another grain's instance would show it
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				if m, ok := msg.(callWho); ok {
					r, err := silo.Call[string](silo.AllowCallChainReentrancy(ctx), c.Silo(), m.target, "who")
					return me + r, err
				}
				return me, nil
			}
		}, silo.WithReentrant(), silo.WithFilters(check, precall)))
	})
	ctx := ctxT(t)
	const grains, callers, calls = 12, 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				from := grain.NewIntID("r", int64((c+i)%grains))
				to := grain.NewIntID("r", int64((c*7+i*3)%grains)) // sometimes from itself: a callback
				r, err := silo.Call[string](ctx, s, from, callWho{to})
				if err == nil && r != from.Key()+":"+to.Key()+":" {
					err = fmt.Errorf("%v -> %v: %q", from, to, r)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// kept is what a filter kept of a turn: its next, its Context and ctx.
type kept struct {
	next grain.Grain
	gc   *grain.Context
	ctx  context.Context
}

// held is a grain whose "wait" message holds its turn until told to go
// on, having said it entered.
type held struct {
	n       int
	entered chan struct{}
	goOn    chan struct{}
}

func (g *held) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "wait" {
		g.entered <- struct{}{}
		<-g.goOn
	}
	g.n++
	return g.n, nil
}

// A filter that keeps next past its turn — handing it to a goroutine, say —
// and calls it later is refused with ErrNextOutsideTurn, whether the
// worker that ran the turn is idle or inside another turn's grain: the
// grain is not entered outside its turn (it used to be, or next panicked
// on a nil grain in the filter's goroutine).
func TestAFiltersNextKeptPastItsTurnIsRefused(t *testing.T) {
	keep := make(chan kept, 1)
	keeping := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		if msg == "keep" {
			keep <- kept{next, c, ctx}
			return "kept", nil
		}
		return next.Receive(ctx, c, msg)
	})
	g := &held{entered: make(chan struct{}), goOn: make(chan struct{})}
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "g", func(grain.ID) *held { return g }, silo.WithFilters(keeping)))
	})
	ctx := ctxT(t)
	id := grain.NewID("g", "a")

	r, err := s.Ask(ctx, id, "keep")
	require.NoError(t, err)
	require.Equal(t, "kept", r)
	k := <-keep

	// The turn is over and the worker idle (the reply came after the
	// turn let go of its grain).
	_, err = k.next.Receive(k.ctx, k.gc, "late")
	require.ErrorIs(t, err, grain.ErrNextOutsideTurn)

	// Another turn of the grain is inside the grain, on the same worker.
	asked := make(chan error, 1)
	go func() {
		_, err := s.Ask(ctx, id, "wait")
		asked <- err
	}()
	<-g.entered
	_, err = k.next.Receive(k.ctx, k.gc, "late")
	require.ErrorIs(t, err, grain.ErrNextOutsideTurn)
	close(g.goOn)
	require.NoError(t, <-asked)

	n, err := silo.Call[int](ctx, s, id, "count")
	require.NoError(t, err)
	require.Equal(t, 2, n, "the grain ran the wait and the count, never a late call")
}

// A filter may call next more than once in its turn — again after it
// recovered a panic of the grain's, to retry — and each call goes in.
func TestAFilterMayCallNextAgainAfterRecoveringItsPanic(t *testing.T) {
	j := newJournal()
	retrying := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (r any, err error) {
		if _, ok := msg.(boom); !ok {
			return next.Receive(ctx, c, msg)
		}
		func() {
			defer func() { _ = recover() }()
			r, err = next.Receive(ctx, c, msg)
		}()
		return next.Receive(ctx, c, say{"retried"})
	})
	s := filteredSilo(t, j, silo.Config{}, silo.WithFilters(retrying))
	ctx := ctxT(t)

	r, err := silo.Call[string](ctx, s, grain.NewID("j", "a"), boom{"once"})
	require.NoError(t, err)
	require.Equal(t, "retried", r)
	require.Equal(t, []string{"activate", "grain j/a {once}", "grain j/a {retried}"}, j.take())
}
