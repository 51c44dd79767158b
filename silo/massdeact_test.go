package silo_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// endedSession counts its deactivations.
type endedSession struct{ gone *atomic.Int64 }

func (g endedSession) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

func (g endedSession) OnDeactivate(context.Context, *grain.Context) error {
	g.gone.Add(1)
	return nil
}

// watcher tells itself again and again, noting a count at each turn
// (sessions gone, ticks come), until it reaches all or it has run its turns.
type watcher struct {
	count  func() int64
	all    int64
	turns  int
	seen   []int64
	report chan<- []int64
}

func (g *watcher) Receive(ctx context.Context, c *grain.Context, _ any) (any, error) {
	n := g.count()
	g.seen = append(g.seen, n)
	if n == g.all || len(g.seen) == g.turns {
		g.report <- g.seen
		return nil, nil
	}
	return nil, c.Silo().Tell(ctx, c.ID(), "again")
}

// A burst of grains all idle at once — sessions that ended together — is
// collected in slices, between which the partition serves its other
// grains: a grain telling itself over and over runs while the sessions go,
// where it used to wait for all of them (every expired grain was taken in
// one round and every deactivation run in the next: a million on two
// partitions held a live grain's ask for 0.25 s, 2.4 s when each had an
// OnDeactivate).
func TestAMassDeactivationHoldsUpNoLiveGrain(t *testing.T) {
	const sessions = 20_000
	var gone atomic.Int64
	report := make(chan []int64, 1)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: time.Minute, IdleQuantum: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "session", func(grain.ID) endedSession { return endedSession{&gone} }))
		require.NoError(t, silo.Register(s, "watcher", func(grain.ID) *watcher {
			return &watcher{count: gone.Load, all: sessions, turns: 1_000_000, report: report}
		}, silo.WithIdleTimeout(time.Hour)))
	})
	ctx := ctxT(t)
	askAll(t, s, "session", 0, sessions, "hello")
	require.Equal(t, sessions, s.Stats().Activations["session"])

	require.NoError(t, s.Tell(ctx, grain.NewID("watcher", "w"), "start"))
	clk.Advance(2 * time.Minute) // every session idle at once
	requireRanBetween(t, <-report, sessions, "sessions gone")
}

// Shedding under memory pressure chooses its grains in two passes over
// the idle wheel, each taken in slices between which the partition serves
// its other grains: a grain telling itself over and over runs while they
// are chosen, where it used to wait for both passes (a million grains on
// two partitions: 7-9 ms a partition at each shedding tick).
func TestSheddingHoldsUpNoLiveGrain(t *testing.T) {
	const sessions = 40_000 // five slices of the first pass
	var gone atomic.Int64
	report := make(chan []int64, 1)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSilo(t, silo.Config{
		Clock: clk, Partitions: 1, IdleTimeout: time.Hour, IdleQuantum: time.Second,
		MemoryLimit: 1000, MemoryGauge: silo.MemoryGaugeFunc(func() uint64 { return math.MaxUint64 }), // shed all
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "session", func(grain.ID) endedSession { return endedSession{&gone} }))
		require.NoError(t, silo.Register(s, "watcher", func(grain.ID) *watcher {
			return &watcher{count: func() int64 { return int64(s.Stats().Shed) }, all: sessions, turns: 1_000_000, report: report}
		}, silo.WithIdleTimeout(-1)))
	})
	ctx := ctxT(t)
	askAll(t, s, "session", 0, sessions, "hello")

	require.NoError(t, s.Tell(ctx, grain.NewID("watcher", "w"), "start"))
	clk.Advance(time.Second) // an idle tick: memory far over the limit
	requireRanBetween(t, <-report, sessions, "sessions shed")
}

// askAll asks grains kind/from..to-1 msg, eight at a time, and returns
// when every one has answered: each has finished its turns then, even one
// the watchdog handed off (a barrier ask to one grain would not wait for
// another's handed-off turn — which, still running when the clock moved,
// kept that grain from going idle with the others).
func askAll(t *testing.T, s *silo.Silo, kind string, from, to int, msg any) {
	t.Helper()
	ctx := ctxT(t)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(to); i = next.Add(1) - 1 {
				if _, err := s.Ask(ctx, grain.NewIntID(kind, i), msg); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// requireRanBetween checks the counts a watcher saw: the last all of them,
// and some part of the way — it ran between the slices of the burst, not
// only before and after it.
func requireRanBetween(t *testing.T, seen []int64, all int64, what string) {
	t.Helper()
	require.Equal(t, all, seen[len(seen)-1], "%s: all, while the watcher ran", what)
	partial := 0
	for _, n := range seen {
		if n > 0 && n < all {
			partial++
		}
	}
	assert.Positive(t, partial, "%s: the watcher ran between slices of the burst (it ran %d turns)", what, len(seen))
}

// burstTicker starts a one-shot timer due in a second on its first message, and
// counts its tick.
type burstTicker struct{ ticks *atomic.Int64 }

type burstTick struct{}

func (g burstTicker) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	if _, ok := msg.(burstTick); ok {
		g.ticks.Add(1)
		return nil, nil
	}
	return nil, c.StartTimer("t", time.Second, 0, burstTick{})
}

// Timers started together tick together — a hundred thousand players
// loaded at once, each saving every minute — and their ticks are delivered
// in slices, between which the partition serves its other grains: a grain
// telling itself over and over runs while the ticks come, where it used to
// wait for all of them (200,000 ticks of nothing held a live grain's ask
// for 88 ms; with 2 µs of work a tick, 100,000 held it for 131 ms).
func TestABurstOfTicksHoldsUpNoLiveGrain(t *testing.T) {
	const tickers = 5_000
	var ticks atomic.Int64
	report := make(chan []int64, 1)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ticker", func(grain.ID) burstTicker { return burstTicker{&ticks} }))
		require.NoError(t, silo.Register(s, "watcher", func(grain.ID) *watcher {
			return &watcher{count: ticks.Load, all: tickers, turns: 1_000_000, report: report}
		}))
	})
	ctx := ctxT(t)
	askAll(t, s, "ticker", 0, tickers, "start") // every timer started

	require.NoError(t, s.Tell(ctx, grain.NewID("watcher", "w"), "start"))
	clk.Advance(time.Second) // every timer due at once
	requireRanBetween(t, <-report, tickers, "ticks come")
}

// A grain taken for idle but not gone yet — a burst's deactivations run a
// slice a round — that gets a message is not idle any more: it stays, its
// state and all, instead of deactivating and activating again for the
// message (an OnDeactivate and an OnActivate: a save and a load for
// nothing). The others of the burst go.
func TestAMessageCallsOffAnIdleDeactivationNotBegun(t *testing.T) {
	const grains = 300 // more than a slice: some wait in the ready list
	e := newLife(t, silo.Config{IdleTimeout: time.Minute, IdleQuantum: time.Second, HandoffThreshold: time.Hour})
	keys := make([]string, grains)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", i)
		e.call(t, keys[i], incr{1})
	}
	// Hold the partition while the clock moves on, so the idle tick and
	// the message wait in its queue together.
	started, gate := make(chan struct{}), make(chan struct{})
	require.NoError(t, e.s.Tell(e.ctx, e.id("holder"), tellLater{started: started, until: gate, to: e.id("holder"), msg: get{}}))
	<-started
	e.clk.Advance(2 * time.Minute) // all idle: taken at the tick, ahead of the message
	require.NoError(t, e.s.Tell(e.ctx, e.id(keys[0]), incr{1}))
	close(gate)

	assert.Equal(t, 2, e.call(t, keys[0], get{}), "the same instance, with its state")
	assert.Equal(t, 1, e.call(t, keys[0], whoAmI{}))
	gone := map[string]bool{}
	for len(gone) < grains-1 {
		select {
		case k := <-e.j.deact:
			gone[k] = true
		case <-e.ctx.Done():
			t.Fatalf("%d of %d deactivated", len(gone), grains-1)
		}
	}
	assert.False(t, gone[keys[0]], "the grain that got a message stayed")
}

// A deactivation asked for explicitly — Silo.Deactivate, Silo.Stop — of a
// grain already taken for idle is not called off by a message that comes
// after it: the grain goes, for the reason asked, and the message goes to
// a fresh instance.
func TestAMessageDoesNotCallOffAnExplicitDeactivation(t *testing.T) {
	for _, how := range []string{"Deactivate", "Stop"} {
		t.Run(how, func(t *testing.T) {
			e := newLife(t, silo.Config{IdleTimeout: time.Minute, IdleQuantum: time.Second, HandoffThreshold: time.Hour})
			e.call(t, "k", incr{1})
			started, gate := make(chan struct{}), make(chan struct{})
			require.NoError(t, e.s.Tell(e.ctx, e.id("holder"), tellLater{started: started, until: gate, to: e.id("holder"), msg: get{}}))
			<-started
			e.clk.Advance(2 * time.Minute) // k is idle: taken at the tick
			if how == "Stop" {
				require.NoError(t, e.s.Stop(e.ctx, e.id("k")))
			} else {
				require.NoError(t, e.s.Deactivate(e.ctx, e.id("k")))
			}
			require.NoError(t, e.s.Tell(e.ctx, e.id("k"), incr{10})) // after the request
			close(gate)

			select {
			case k := <-e.j.deact:
				assert.Equal(t, "k", k)
			case <-e.ctx.Done():
				t.Fatal("the grain never deactivated: the message called off the request")
			}
			assert.Equal(t, 10, e.call(t, "k", get{}), "a fresh instance has the message")
			assert.Equal(t, 2, e.call(t, "k", whoAmI{}))
			want := map[string]grain.DeactivationReason{"Deactivate": grain.DeactivationRequested, "Stop": grain.DeactivationStopped}[how]
			assert.Equal(t, uint64(1), e.s.Stats().Deactivations[want], "OnDeactivate saw the reason asked for")
		})
	}
}

// A shed taken in slices still takes the grains nearest their idle
// deadline first: of 20,000 sessions, the 10,000 active 30 s before the
// others are the ones that go.
func TestASlicedShedTakesTheMostIdle(t *testing.T) {
	const sessions = 20_000
	gone := make(chan string, sessions)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var used atomic.Uint64
	s := newSilo(t, silo.Config{
		Clock: clk, Partitions: 1, IdleTimeout: time.Hour, IdleQuantum: time.Second,
		MemoryLimit: 1000, MemoryGauge: silo.MemoryGaugeFunc(used.Load),
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "session", func(grain.ID) *tenant { return &tenant{gone: gone} }))
	})
	askAll(t, s, "session", 0, sessions/2, "hello")
	clk.Advance(30 * time.Second)
	askAll(t, s, "session", sessions/2, sessions, "hello")

	// 1500 against a target of 900: 40 % of 20,000, and one more (the
	// share is rounded up), is 8,001 sessions — all of the older half.
	used.Store(1500)
	clk.Advance(time.Second)
	const want = 8_001
	for range want {
		k := <-gone
		var i int
		_, err := fmt.Sscan(k, &i)
		require.NoError(t, err)
		require.Less(t, i, sessions/2, "session %d, of the newer half, shed", i)
	}
	assert.EqualValues(t, want, s.Stats().Shed)
}

// shedStopper begins a shutdown from its turn — or, told a holdUntil,
// holds its partition until released.
type shedStopper struct{ s **silo.Silo }

func (g shedStopper) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if h, ok := msg.(holdUntil); ok {
		close(h.started)
		<-h.release
		return nil, nil
	}
	if err := (*g.s).Shutdown(ctx); !errors.Is(err, silo.ErrShutdownFromTurn) {
		return nil, err
	}
	return nil, nil
}

// A shutdown that begins while a shed goes on ends the shed: the shutdown
// deactivates every grain then anyway, for a reason of its own.
func TestAShutdownEndsAShedUnderWay(t *testing.T) {
	const sessions = 40_000 // five slices of the first pass
	var gone atomic.Int64
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSilo(t, silo.Config{
		Clock: clk, Partitions: 1, IdleTimeout: time.Hour, IdleQuantum: time.Second,
		MemoryLimit: 1000, MemoryGauge: silo.MemoryGaugeFunc(func() uint64 { return math.MaxUint64 }),
		HandoffThreshold: time.Hour, // the holder below keeps the partition
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "session", func(grain.ID) endedSession { return endedSession{&gone} }))
		require.NoError(t, silo.Register(s, "stopper", func(grain.ID) shedStopper { return shedStopper{&s} }, silo.WithIdleTimeout(-1)))
	})
	ctx := ctxT(t)
	askAll(t, s, "session", 0, sessions, "hello")

	// The tick and the stopper's message wait together behind a held turn:
	// the owner takes the tick (the shed's first slice), then the message
	// (the shutdown, queued behind the shed's next slice), whatever the
	// scheduler does meanwhile.
	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Tell(ctx, grain.NewID("stopper", "holder"), holdUntil{started, release}))
	<-started
	clk.Advance(time.Second) // the idle tick, asking for a shed
	require.NoError(t, s.Tell(ctx, grain.NewID("stopper", "x"), "stop"))
	close(release)
	require.NoError(t, s.Shutdown(ctx))
	assert.EqualValues(t, 0, s.Stats().Shed, "the shed ended while it still counted")
	assert.EqualValues(t, sessions, gone.Load())
	assert.EqualValues(t, sessions+2, s.Stats().Deactivations[grain.DeactivationShutdown], "the sessions, the stopper and the holder")
}
