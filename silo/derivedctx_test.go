package silo_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// deriver derives n ctxs with a timeout from its turn's, as a handler
// that bounds its queries does, reports how many goroutines the process
// gained meanwhile, and hands the last one out, to be watched while the
// turn waits for release.
type deriver struct {
	n       int
	gained  chan<- int
	derived chan<- context.Context
	release <-chan struct{}
}

func (d deriver) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	before := runtime.NumGoroutine()
	var last context.Context
	for range d.n {
		c, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		last = c
	}
	d.gained <- runtime.NumGoroutine() - before
	d.derived <- last
	<-d.release
	return nil, last.Err()
}

func deriverSilo(t *testing.T, cfg silo.Config, n int) (*silo.Silo, <-chan int, <-chan context.Context, chan struct{}) {
	gained, derived, release := make(chan int, 1), make(chan context.Context, 1), make(chan struct{})
	s := newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "deriver", func(grain.ID) deriver {
			return deriver{n: n, gained: gained, derived: derived, release: release}
		}))
	})
	return s, gained, derived, release
}

// A ctx derived from an ask's handler ctx ends when its caller gives up,
// with the caller's error, and costs no goroutine: the turn's ctx lets the
// context package register with it (turnCtx.AfterFunc), where before each
// derived ctx took a goroutine to watch the turn's Done.
func TestACtxDerivedInAHandlerEndsWithItsCaller(t *testing.T) {
	s, gained, derived, release := deriverSilo(t, silo.Config{}, 100)
	defer close(release)
	caller, cancel := context.WithCancel(ctxT(t))
	errs := make(chan error, 1)
	go func() {
		_, err := s.Ask(caller, grain.NewID("deriver", "a"), "go")
		errs <- err
	}()
	assert.Less(t, <-gained, 50, "a goroutine for each derived ctx")
	d := <-derived
	require.NoError(t, d.Err())
	cancel()
	<-d.Done()
	require.ErrorIs(t, d.Err(), context.Canceled)
	require.ErrorIs(t, <-errs, context.Canceled)
}

// The silo's default call timeout ends a derived ctx too, as a deadline.
func TestACtxDerivedInAHandlerEndsAtTheCallTimeout(t *testing.T) {
	s, gained, derived, release := deriverSilo(t, silo.Config{CallTimeout: 20 * time.Millisecond}, 1)
	defer close(release)
	errs := make(chan error, 1)
	go func() {
		_, err := s.Ask(context.Background(), grain.NewID("deriver", "a"), "go")
		errs <- err
	}()
	<-gained
	d := <-derived
	<-d.Done()
	require.ErrorIs(t, d.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, <-errs, grain.ErrTimeout)
}

// Close ends a derived ctx with the silo's.
func TestACtxDerivedInAHandlerEndsWithTheSilo(t *testing.T) {
	s, gained, derived, release := deriverSilo(t, silo.Config{DeactivationTimeout: time.Millisecond}, 1)
	errs := make(chan error, 1)
	go func() {
		_, err := s.Ask(ctxT(t), grain.NewID("deriver", "a"), "go")
		errs <- err
	}()
	<-gained
	d := <-derived
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	<-d.Done()
	require.ErrorIs(t, d.Err(), context.Canceled)
	close(release)
	<-closed
	// The silo's answer (ErrSiloClosed), or the handler's, if it came first.
	err := <-errs
	assert.True(t, errors.Is(err, grain.ErrSiloClosed) || errors.Is(err, context.Canceled), "%v", err)
}

// A ctx derived from a handler's and kept past its turn ends with the
// turn; one derived after the turn is done at once.
func TestACtxDerivedInAHandlerEndsWithItsTurn(t *testing.T) {
	s, gained, derived, release := deriverSilo(t, silo.Config{}, 1)
	close(release)
	_, err := s.Ask(ctxT(t), grain.NewID("deriver", "a"), "go")
	require.NoError(t, err)
	<-gained
	d := <-derived
	<-d.Done()
	require.ErrorIs(t, d.Err(), context.Canceled)
	late, cancel := context.WithTimeout(d, time.Hour)
	defer cancel()
	<-late.Done()
}

// lateWatcher reads its ctx only once released: by then its caller may
// have given up.
type lateWatcher struct {
	in      chan<- struct{}
	release <-chan struct{}
	out     chan<- error
}

func (l lateWatcher) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	l.in <- struct{}{}
	<-l.release
	select {
	case <-ctx.Done():
		l.out <- ctx.Err()
	case <-time.After(10 * time.Second):
		l.out <- nil
	}
	return nil, nil
}

// A handler's ctx ends when its caller gives up, whether the handler was
// watching it then or looks only afterwards: the caller, which watches its
// own ctx as it waits, ends the handler's (no registration with the
// caller's ctx, which cost three allocations a call).
func TestAHandlersCtxEndsWhenItsCallerGivesUpBeforeItLooks(t *testing.T) {
	in, release, out := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "late", func(grain.ID) lateWatcher {
			return lateWatcher{in: in, release: release, out: out}
		}))
	})
	caller, cancel := context.WithCancel(ctxT(t))
	errs := make(chan error, 1)
	go func() {
		_, err := s.Ask(caller, grain.NewID("late", "a"), "go")
		errs <- err
	}()
	<-in
	cancel()
	require.ErrorIs(t, <-errs, context.Canceled) // the caller has gone
	close(release)                               // only now does the handler look
	require.ErrorIs(t, <-out, context.Canceled)
}

// ctxWaiter waits for its ctx to end, and says why.
type ctxWaiter struct {
	in  chan<- struct{}
	out chan<- error
}

func (w ctxWaiter) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	done := ctx.Done() // the handler's own channel: an ask's ctx can end in several ways
	w.in <- struct{}{}
	<-done
	w.out <- ctx.Err()
	return nil, ctx.Err()
}

// Close ends the ctx of a call's handler that waits on it — through its
// partition's set of live handler ctxs, not a registration each with the
// silo's base ctx.
func TestCloseEndsAWaitingHandlersCtx(t *testing.T) {
	handled, asked := closeAWaitingAsk(t, silo.Config{})
	require.ErrorIs(t, handled, context.Canceled)
	require.ErrorIs(t, asked, grain.ErrSiloClosed)
}

// An ask whose handler returns, on its ctx's end, while it still holds its
// partition fails with ErrSiloClosed, as one handed off does (closeAll):
// not with the handler's context.Canceled, which its caller never asked
// for. Its turn ends before its owner takes Close's message; it was
// answered with what the handler returned.
func TestCloseFailsAnAskWhoseHandlerHeldItsPartition(t *testing.T) {
	// No handoff while the test lasts: the waiting turn keeps its owner.
	handled, asked := closeAWaitingAsk(t, silo.Config{HandoffThreshold: time.Hour})
	require.ErrorIs(t, handled, context.Canceled, "the handler saw its ctx end")
	require.ErrorIs(t, asked, grain.ErrSiloClosed)
	assert.NotErrorIs(t, asked, context.Canceled)
}

// closeAWaitingAsk asks a ctxWaiter on a silo of cfg, closes the silo once
// the handler waits, and returns the ctx error the handler saw and the
// caller's error.
func closeAWaitingAsk(t *testing.T, cfg silo.Config) (handled, asked error) {
	in, out := make(chan struct{}, 1), make(chan error, 1)
	s := newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "waiter", func(grain.ID) ctxWaiter { return ctxWaiter{in: in, out: out} }))
	})
	errs := make(chan error, 1)
	go func() {
		_, err := s.Ask(context.Background(), grain.NewID("waiter", "a"), "wait")
		errs <- err
	}()
	<-in
	require.NoError(t, s.Close())
	return <-out, <-errs
}

// readsDoneOnActivate looks at its ctx's Done in OnActivate, as a database
// call loading its state would, and reports its ctx's Err to each "check".
type readsDoneOnActivate struct{ seen chan error }

func (g *readsDoneOnActivate) OnActivate(ctx context.Context, _ *grain.Context) error {
	select {
	case <-ctx.Done():
	default:
	}
	return nil
}

func (g *readsDoneOnActivate) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "check" {
		g.seen <- ctx.Err()
	}
	return nil, nil
}

// An OnActivate run by a tell that reads its ctx's Done leaves nothing
// behind for the turns after it: they found their ctx canceled — the
// grain's own later tells and every other grain's on the goroutine that
// ran it, so a handler passing its ctx to a database failed every time.
func TestAnActivationThatReadsDoneLeavesLaterTurnsTheirCtx(t *testing.T) {
	seen := make(chan error, 1)
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "loader", func(grain.ID) *readsDoneOnActivate { return &readsDoneOnActivate{seen: seen} }))
	})
	ctx := ctxT(t)
	for _, key := range []string{"a", "a", "b", "b"} { // a tell activates each; then a later tell
		require.NoError(t, s.Tell(ctx, grain.NewID("loader", key), "check"))
		require.NoError(t, <-seen, key)
	}
}

// A handler that bounds its work with a timeout derived from a tell's turn
// ctx, and sees it expire: the context package's timer then unlinks the
// derived ctx from its parent, on a goroutine of its own, which may still
// run as the worker's ctx is readied for the next turn. It must not read
// that ctx (a data race under -race, in the program's tests): the turn's
// ctx sends the context package through its AfterFunc, whose undoing
// touches only the silo's own ctx.
func TestATimeoutDerivedInATellTurnLeavesTheReusedCtxAlone(t *testing.T) {
	const turns = 300
	done := make(chan struct{}, turns)
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "bounded", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "bound" {
					c, cancel := context.WithTimeout(ctx, 50*time.Microsecond)
					defer cancel()
					<-c.Done() // its timer fired: the unlinking runs on after this
				}
				done <- struct{}{}
				return nil, nil
			}
		}))
	})
	ctx := ctxT(t)
	for i := range turns {
		msg := "bound"
		if i%2 == 1 {
			msg = "next" // a turn right after, on the same worker and its ctx
		}
		require.NoError(t, s.Tell(ctx, grain.NewIntID("bounded", int64(i%7)), msg))
	}
	for range turns {
		<-done
	}
}

// A tell's handler passes its ctx to a library that watches it from a
// goroutine of its own until the work is closed — database/sql's Rows do
// (awaitDone), net/http's transport too — and that goroutine may first look
// at the ctx after the handler has returned, as the worker readies the ctx
// for its next turn. The look must not race with that (under -race, in the
// program's tests): a turn rewrites only the fields of its worker's ctx
// that change, and a tell's next turn changes none that Done reads.
func TestALibraryWatchingATellsCtxLateDoesNotRaceTheNextTurn(t *testing.T) {
	const turns = 400
	done := make(chan struct{}, turns)
	var watchers sync.WaitGroup
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "querier", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				closed := make(chan struct{})
				watchers.Add(1)
				go func() { // as database/sql's Rows.awaitDone
					defer watchers.Done()
					select {
					case <-ctx.Done():
					case <-closed:
					}
				}()
				close(closed) // the rows are closed before the handler returns
				done <- struct{}{}
				return nil, nil
			}
		}))
	})
	ctx := ctxT(t)
	for i := range turns {
		require.NoError(t, s.Tell(ctx, grain.NewIntID("querier", int64(i%5)), i))
	}
	for range turns {
		<-done
	}
	watchers.Wait()
}

// loadingGrain's OnActivate loads its state through a library that watches
// the ctx from a goroutine of its own, as database/sql's Rows do.
type loadingGrain struct{ watchers *sync.WaitGroup }

func (g loadingGrain) OnActivate(ctx context.Context, _ *grain.Context) error {
	closed := make(chan struct{})
	g.watchers.Add(1)
	go func() {
		defer g.watchers.Done()
		select {
		case <-ctx.Done():
		case <-closed:
		}
	}()
	close(closed)
	return nil
}

func (loadingGrain) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

// The same for OnActivate, activated by tells and by asks: the hook's ctx
// is its own, so the turns after it on the worker rewrite nothing a late
// look at it reads.
func TestALibraryWatchingAHooksCtxLateDoesNotRaceTheNextTurn(t *testing.T) {
	var watchers sync.WaitGroup
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "loading", func(grain.ID) loadingGrain { return loadingGrain{&watchers} },
			silo.WithIdleTimeout(-1)))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	ctx := ctxT(t)
	for i := range 200 {
		id := grain.NewIntID("loading", int64(i)) // a new grain each time: an activation
		if i%2 == 0 {
			require.NoError(t, s.Tell(ctx, id, "hello"))
		} else {
			_, err := s.Ask(ctx, id, "hello")
			require.NoError(t, err)
		}
		require.NoError(t, s.Tell(ctx, grain.NewID("counter", "c"), incr{1})) // the worker's next turn
	}
	_, err := s.Ask(ctx, grain.NewID("counter", "c"), get{})
	require.NoError(t, err)
	watchers.Wait()
}

// deriveKeeper derives a ctx from its turn's and hands out both.
type deriveKeeper struct{ kept chan<- [2]context.Context }

func (k deriveKeeper) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if errs, ok := msg.(chan error); ok { // report the ctx's Err, in the turn
		errs <- ctx.Err()
		return nil, nil
	}
	d, cancel := context.WithCancel(ctx)
	k.kept <- [2]context.Context{ctx, d}
	_ = cancel // ends with its parent: what the test checks
	return nil, nil
}

// A tell's ctx of a kind whose turns interleave ends with its turn (an
// ownCtx): a ctx derived from it in the turn ends then too, and one derived
// from it after the turn is over is done at once — the context package
// registers with the turn's ctx (ownCtx.AfterFunc), which runs the
// registration at once, on a goroutine of its own, for a turn that is over.
func TestACtxDerivedFromAnInterleavingTellsCtxEndsWithTheTurn(t *testing.T) {
	kept := make(chan [2]context.Context, 1)
	errs := make(chan error, 1)
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "dk", func(grain.ID) deriveKeeper { return deriveKeeper{kept} }, silo.WithReentrant()))
	})
	ctx := ctxT(t)
	id := grain.NewID("dk", "a")
	require.NoError(t, s.Tell(ctx, id, "keep"))
	got := <-kept
	_, err := s.Ask(ctx, id, "barrier") // the tell's turn is over once this is answered
	require.NoError(t, err)
	<-kept
	turn, inTurn := got[0], got[1]
	requireDone := func(c context.Context, what string) {
		t.Helper()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s is not done after its turn", what)
		}
		require.ErrorIs(t, c.Err(), context.Canceled, what)
	}
	requireDone(inTurn, "the ctx derived in the turn")
	after, cancel := context.WithCancel(turn)
	defer cancel()
	requireDone(after, "a ctx derived after the turn")
	stop := context.AfterFunc(turn, func() {})
	assert.False(t, stop(), "AfterFunc on an ended turn's ctx: f runs (or ran), no stop")

	// The turns after it on the goroutine that ran it, which keeps its ctx
	// for the next such turn (not the Done channel that ended with the
	// turn): each finds its ctx live — the grain's own and another grain's
	// of the kind (one partition: one goroutine runs them all).
	for i, key := range []string{"a", "b", "a", "b"} {
		require.NoError(t, s.Tell(ctx, grain.NewID("dk", key), errs))
		require.NoError(t, <-errs, "tell %d after the first", i)
	}
}
