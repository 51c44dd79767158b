package silo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// pool is a stateless worker that counts its turns running at once across
// all its activations, and reports its deactivations.
type pool struct {
	guard   turnGuard // one turn at a time per activation, still
	running *atomic.Int64
	most    *atomic.Int64
	entered chan<- struct{}
	gone    chan<- string
	quick   *atomic.Int64 // "quick" messages handled
}

type (
	poolWork struct{ until <-chan struct{} }
	callSelf struct{}
)

func (g *pool) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	g.guard.enter()
	defer g.guard.leave()
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	switch m := msg.(type) {
	case poolWork:
		g.entered <- struct{}{}
		select {
		case <-m.until:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case callSelf:
		return gc.Silo().Ask(ctx, gc.ID(), "hi")
	case boom:
		panic(m.v)
	case string:
		if m == "quick" {
			g.quick.Add(1)
		}
	}
	return gc.ID().Key(), nil
}

func (g *pool) OnDeactivate(_ context.Context, gc *grain.Context) error {
	g.gone <- gc.ID().Key()
	return nil
}

type poolEnv struct {
	s             *silo.Silo
	built         atomic.Int64
	running, most atomic.Int64
	overlaps      atomic.Int64
	quick         atomic.Int64
	entered       chan struct{}
	gone          chan string
}

func newPool(t *testing.T, partitions int, opts ...silo.KindOption) *poolEnv {
	t.Helper()
	e := &poolEnv{entered: make(chan struct{}, 1024), gone: make(chan string, 1024)}
	e.s = newSilo(t, silo.Config{Partitions: partitions}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "pool", func(grain.ID) *pool {
			e.built.Add(1)
			return &pool{guard: turnGuard{overlaps: &e.overlaps}, running: &e.running, most: &e.most, entered: e.entered, gone: e.gone, quick: &e.quick}
		}, opts...))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	return e
}

// waitEntered waits for n turns of work to have begun.
func (e *poolEnv) waitEntered(t *testing.T, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := range n {
		select {
		case <-e.entered:
		case <-ctx.Done():
			t.Fatalf("%d of %d turns began", i, n)
		}
	}
}

// flood sends n asks of work to one identity of the pool, and returns a
// wait for their answers.
func (e *poolEnv) flood(t *testing.T, key string, n int, until <-chan struct{}) func() {
	t.Helper()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			v, err := e.s.Ask(ctx, grain.NewID("pool", key), poolWork{until})
			if err == nil && v != key {
				err = fmt.Errorf("answered %v", v)
			}
			errs <- err
		})
	}
	return func() {
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}

// One identity of a stateless kind runs as many turns at once as it has
// activations, each in a partition of its own, and never more.
func TestStatelessWorkerRunsAnIdentityInParallel(t *testing.T) {
	e := newPool(t, 4, silo.WithStatelessWorker(2))
	release := make(chan struct{})
	wait := e.flood(t, "hasher", 64, release)
	e.waitEntered(t, 2) // two turns of one identity at once: only two activations can
	close(release)
	wait()

	assert.EqualValues(t, 2, e.most.Load(), "never more turns at once than activations")
	assert.EqualValues(t, 2, e.built.Load())
	assert.Zero(t, e.overlaps.Load(), "one turn at a time in each activation")
	assert.Equal(t, 2, e.s.Stats().Activations["pool"])
	ids, err := e.s.ActiveGrains(ctxT(t), "pool")
	require.NoError(t, err)
	assert.Equal(t, []grain.ID{grain.NewID("pool", "hasher")}, ids, "listed once")
	all, err := e.s.ActiveGrains(ctxT(t), "")
	require.NoError(t, err)
	assert.Equal(t, []grain.ID{grain.NewID("pool", "hasher")}, all)
}

// A message goes to the least loaded activation: while one is stuck in a
// long turn, the others get every message.
func TestStatelessWorkerSendsAroundABusyActivation(t *testing.T) {
	e := newPool(t, 2, silo.WithStatelessWorker(2))
	ctx := ctxT(t)
	id := grain.NewID("pool", "w")
	release := make(chan struct{})
	defer close(release)
	require.NoError(t, e.s.Tell(ctx, id, poolWork{release})) // one activation blocks
	e.waitEntered(t, 1)
	for range 50 {
		ask, cancel := context.WithTimeout(ctx, 10*time.Second) // a guard: sent to the blocked activation, it would wait for good
		_, err := e.s.Ask(ask, id, "quick")
		cancel()
		require.NoError(t, err, "sent to the blocked activation")
	}
	for _, b := range e.s.Stats().Backlog {
		assert.Zero(t, b, "nothing waits behind the blocked turn")
	}
}

// WithStatelessWorker(0) is one activation per partition; more than the
// partitions is capped there.
func TestStatelessWorkerDefaultsToOnePerPartition(t *testing.T) {
	for _, n := range []int{0, 9} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newPool(t, 3, silo.WithStatelessWorker(n))
			release := make(chan struct{})
			wait := e.flood(t, "k", 96, release)
			e.waitEntered(t, 3)
			close(release)
			wait()
			assert.EqualValues(t, 3, e.most.Load())
			assert.EqualValues(t, 3, e.built.Load())
		})
	}
}

// Deactivate and Stop reach every activation of a stateless identity.
func TestStatelessWorkerDeactivateAndStopReachEveryActivation(t *testing.T) {
	e := newPool(t, 4, silo.WithStatelessWorker(0))
	ctx := ctxT(t)
	id := grain.NewID("pool", "w")
	for _, stop := range []bool{false, true} {
		for len(e.entered) > 0 {
			<-e.entered // the last round's turns: waitEntered would count them
		}
		release := make(chan struct{})
		wait := e.flood(t, "w", 128, release)
		e.waitEntered(t, 4)
		close(release)
		wait()
		require.Equal(t, 4, e.s.Stats().Activations["pool"])
		if stop {
			require.NoError(t, e.s.Stop(ctx, id))
		} else {
			require.NoError(t, e.s.Deactivate(ctx, id))
		}
		for range 4 {
			assert.Equal(t, "w", <-e.gone)
		}
		// A barrier on every partition: each hook has returned, and its
		// activation left the directory, before the listing is read.
		ids, err := e.s.ActiveGrains(ctx, "")
		require.NoError(t, err)
		assert.Empty(t, ids)
		assert.Equal(t, 0, e.s.Stats().Activations["pool"])
	}
	assert.Empty(t, e.s.Stats().DeadLetters)
}

// A call chain may not come back to a stateless identity: the call fails at
// once, as for any grain, rather than wait on the activation that called.
func TestStatelessWorkerCallingItselfIsACycle(t *testing.T) {
	e := newPool(t, 2, silo.WithStatelessWorker(0))
	_, err := e.s.Ask(ctxT(t), grain.NewID("pool", "w"), callSelf{})
	require.ErrorIs(t, err, grain.ErrCallCycle)
}

func TestStatelessWorkerRefusesANegativeCount(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()
	err = silo.Register(s, "pool", func(grain.ID) *counter { return &counter{} }, silo.WithStatelessWorker(-1))
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "WithStatelessWorker(-1)")
	var target *grain.IDError
	assert.False(t, errors.As(err, &target))
}

// While one of an identity's activations is quarantined, its messages go to
// the others, instead of a share of them becoming dead letters.
func TestStatelessWorkerSendsAroundAQuarantinedActivation(t *testing.T) {
	e := newPool(t, 2, silo.WithStatelessWorker(2),
		silo.WithSupervision(activation.Supervision{MaxRestarts: 1, Window: time.Hour, Quarantine: time.Hour}))
	ctx := ctxT(t)
	id := grain.NewID("pool", "w")
	for e.s.Stats().Stops == 0 { // fail until one activation is stopped and quarantined
		_, err := e.s.Ask(ctx, id, boom{"x"})
		require.ErrorIs(t, err, grain.ErrPanic)
	}
	for range 50 {
		_, err := e.s.Ask(ctx, id, "quick")
		require.NoError(t, err, "sent to the quarantined activation")
	}
}

// An identity that gets one call at a time keeps one activation: a second
// is made only while the first is busy, as in Orleans.
func TestStatelessWorkerAddsActivationsOnlyWhenBusy(t *testing.T) {
	e := newPool(t, 4, silo.WithStatelessWorker(0))
	ctx := ctxT(t)
	for range 50 {
		_, err := e.s.Ask(ctx, grain.NewID("pool", "w"), "quick")
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, e.built.Load())
	assert.Equal(t, 1, e.s.Stats().Activations["pool"])
}

// A send to a stateless identity counts against the partition it chose
// from the moment it chose, not only once it has pushed: what a send does
// in between — here a WithMayInterleave predicate that waits, as a
// contended ctx's mutex did under load — must not let every other send
// choose the same partition meanwhile. (With the count taken at the push,
// all eight went to one activation.)
func TestStatelessWorkerCountsASendFromItsChoice(t *testing.T) {
	inPred := make(chan struct{})
	release := make(chan struct{})
	pred := func(msg any) bool {
		if msg == "slow-send" {
			inPred <- struct{}{}
			<-release
		}
		return false
	}
	e := newPool(t, 4, silo.WithStatelessWorker(2), silo.WithMayInterleave(pred))
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for range 8 { // one at a time: each has chosen before the next chooses
		wg.Go(func() { assert.NoError(t, e.s.Tell(ctx, grain.NewID("pool", "p"), "slow-send")) })
		<-inPred
	}
	close(release)
	wg.Wait()
	// A barrier on each activation: an ask to the identity goes to one
	// of them; the two activations' counts say where the tells went.
	require.Eventually(t, func() bool { return e.built.Load() == 2 }, 10*time.Second, time.Millisecond,
		"the tells went to both activations, not all to the first")
}
