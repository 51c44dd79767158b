package silo_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

// alarm starts a timer in OnActivate and panics on demand.
type alarm struct {
	ticks    chan<- int
	instance int
}

type crash struct{}

func (a *alarm) OnActivate(_ context.Context, c *grain.Context) error {
	return c.StartTimer("beat", time.Second, time.Second, tickMsg{"beat"})
}

func (a *alarm) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch msg.(type) {
	case tickMsg:
		a.ticks <- a.instance
	case crash:
		panic("crash")
	}
	return a.instance, nil
}

// A timer started in OnActivate runs; a restart stops the old instance's
// timers, and the fresh instance's OnActivate starts its own.
func TestTimersFromOnActivateAndAcrossRestarts(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ticks := make(chan int, 16)
	var built atomic.Int32
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "alarm", func(grain.ID) *alarm {
			return &alarm{ticks: ticks, instance: int(built.Add(1))}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("alarm", "a")
	_, err := s.Ask(ctx, id, get{})
	require.NoError(t, err)
	clk.Advance(time.Second)
	assert.Equal(t, 1, <-ticks)
	_, err = s.Ask(ctx, id, get{}) // barrier: the tick's turn finished, the next one is scheduled
	require.NoError(t, err)

	_, err = s.Ask(ctx, id, crash{})
	require.ErrorIs(t, err, grain.ErrPanic)
	n, err := silo.Call[int](ctx, s, id, get{}) // restarted at once: instance 2
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	clk.Advance(time.Second)
	assert.Equal(t, 2, <-ticks, "only the fresh instance's timer ticks")
	_, err = s.Ask(ctx, id, get{})
	require.NoError(t, err)
	assert.Empty(t, ticks)
}

// slowPeer answers once released.
type slowPeer struct{ release <-chan struct{} }

func (p *slowPeer) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	select {
	case <-p.release:
		return "late", nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reent is a reentrant grain: while it waits on the slow peer, other
// messages to it run.
type reent struct {
	guard turnGuard
	seen  int
}

type (
	waitPeer struct{}
	ping     struct{}
)

func (r *reent) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	r.guard.enter()
	defer r.guard.leave()
	switch msg.(type) {
	case waitPeer:
		r.guard.leave() // the turn gives the grain up while it waits
		v, err := silo.Call[string](ctx, c.Silo(), grain.NewID("peer", "p"), ping{})
		r.guard.enter()
		return v, err
	case ping:
		r.seen++
		return r.seen, nil
	}
	return nil, errors.New("reent: unknown message")
}

func TestReentrantKindInterleavesWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	var overlaps atomic.Int64
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "reent", func(grain.ID) *reent { return &reent{guard: turnGuard{overlaps: &overlaps}} },
			silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "peer", func(grain.ID) *slowPeer { return &slowPeer{release: release} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("reent", "r")
	waited := make(chan any, 1)
	go func() { v, _ := s.Ask(ctx, id, waitPeer{}); waited <- v }()
	// While the first turn waits on the peer, pings run on the same grain.
	require.Eventually(t, func() bool {
		n, err := silo.Call[int](ctx, s, id, ping{})
		return err == nil && n >= 3
	}, 5*time.Second, time.Millisecond)
	select {
	case v := <-waited:
		t.Fatalf("the waiting turn finished early: %v", v)
	default:
	}
	close(release)
	assert.Equal(t, "late", <-waited)
	assert.Zero(t, overlaps.Load())
}

// A tick that waited for a grain which then deactivated is dropped: timers
// never reactivate a grain, and a tick is no dead letter.
func TestTickWaitingForADeactivatingGrainIsDropped(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ticks := make(chan string, 16)
	var overlaps atomic.Int64
	j := newJournal()
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ticker", func(grain.ID) *ticker {
			return &ticker{guard: turnGuard{overlaps: &overlaps}, ticks: ticks, j: j}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("ticker", "t")
	_, err := s.Ask(ctx, id, startTimer{"every", time.Second, time.Second})
	require.NoError(t, err)
	gate, running := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Tell(ctx, id, gateMsg{gate, running}))
	<-running
	clk.Advance(time.Second) // the tick waits behind the running turn
	waitBacklog(t, s, 1)
	require.NoError(t, s.Deactivate(ctx, id))
	require.Eventually(t, func() bool { return s.Stats().QueueDepth[0] == 0 }, 5*time.Second, time.Millisecond)
	close(gate)
	<-j.deact
	waitBacklog(t, s, 0)
	_, err = s.Ask(ctx, grain.NewID("ticker", "other"), get{}) // a barrier on the partition
	require.NoError(t, err)
	assert.Equal(t, 1, s.Stats().Activations["ticker"], "only the other grain: the tick did not reactivate t")
	assert.Empty(t, ticks)
	assert.Empty(t, s.Stats().DeadLetters)
}

// spinner burns CPU in its turn, or calls another grain and waits.
type spinner struct{}

type (
	spin    struct{ d time.Duration }
	callOut struct{ to grain.ID }
)

func (spinner) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case spin:
		busyWork(m.d)
	case callOut:
		return c.Silo().Ask(ctx, m.to, spin{150 * time.Millisecond})
	}
	return nil, nil
}

// A turn that holds its partition past the handoff threshold is timed and
// reported; a turn that waits in a call is not slow.
func TestSlowTurnsAreReported(t *testing.T) {
	var logs syncBuffer
	s := newSilo(t, silo.Config{Partitions: 2, HandoffThreshold: 20 * time.Millisecond, Logger: newTextLogger(&logs)},
		func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "spin", func(grain.ID) spinner { return spinner{} }))
		})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("spin", "fast"), spin{0})
	require.NoError(t, err)
	assert.Zero(t, s.Stats().SlowTurns)
	_, err = s.Ask(ctx, grain.NewID("spin", "slow"), spin{200 * time.Millisecond})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Stats().SlowTurns >= 1 }, 5*time.Second, time.Millisecond)
	s.WaitLogged() // the line comes before the count (turn.go: reportSlow)
	assert.Contains(t, logs.String(), "slow turn")
	assert.Contains(t, logs.String(), "spin/slow")
	// The caller's turn waited 150 ms in a call: the callee was slow, the
	// caller was not. With more than one core the callee is a grain of the
	// other partition: the caller's turn yields, holding its partition, in
	// case the answer comes at once (Silo.Ask), and the callee spins on the
	// other core. On one core that yield would wait behind the spinning
	// callee until the scheduler took the core from it — a time slice, or
	// far longer when the process itself waits for a CPU (130 ms once in
	// CI, whose one-core step runs four test binaries on two cores) — and
	// the watchdog would hand the caller's partition off and report the
	// turn, truly. So there the callee is of the caller's own partition,
	// which a call hands off at once.
	caller := grain.NewID("spin", "caller")
	pt, err := queues.NewPartitioner(2)
	require.NoError(t, err)
	var callee grain.ID
	for i := 0; ; i++ {
		callee = grain.NewID("spin", fmt.Sprint("callee", i))
		if (pt.Partition(callee) == pt.Partition(caller)) == (runtime.GOMAXPROCS(0) == 1) {
			break
		}
	}
	before := s.Stats().SlowTurns
	_, err = s.Ask(ctx, caller, callOut{callee})
	require.NoError(t, err)
	assert.LessOrEqual(t, s.Stats().SlowTurns, before+1)
	s.WaitLogged()
	assert.NotContains(t, logs.String(), "spin/caller")
}

// recorder is a reentrant grain that records the order its pings start in.
type recorder struct{ order []int }

type (
	awaitPeer struct{}
	seqPing   int
	getOrder  struct{}
)

func (r *recorder) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case awaitPeer:
		return silo.Call[string](ctx, c.Silo(), grain.NewID("peer", "p"), ping{})
	case seqPing:
		r.order = append(r.order, int(m))
	case getOrder:
		return append([]int(nil), r.order...), nil
	}
	return nil, nil
}

// Interleaved turns of a reentrant grain start in the order their messages
// arrived.
func TestReentrantInterleavingKeepsArrivalOrder(t *testing.T) {
	release := make(chan struct{})
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "rec", func(grain.ID) *recorder { return &recorder{} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "peer", func(grain.ID) *slowPeer { return &slowPeer{release: release} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("rec", "r")
	waited := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, awaitPeer{}); waited <- err }()
	// Once the first turn waits on the peer, a ping interleaves.
	require.Eventually(t, func() bool {
		_, err := s.Ask(ctx, id, seqPing(0))
		return err == nil
	}, 5*time.Second, time.Millisecond)
	for i := 1; i <= 200; i++ {
		require.NoError(t, s.Tell(ctx, id, seqPing(i)))
	}
	close(release)
	require.NoError(t, <-waited)
	order, err := silo.Call[[]int](ctx, s, id, getOrder{})
	require.NoError(t, err)
	var pings []int
	for _, v := range order {
		if v > 0 {
			pings = append(pings, v)
		}
	}
	require.Len(t, pings, 200)
	for i, v := range pings {
		require.Equal(t, i+1, v, "ping %d started out of order", v)
	}
}

// A turn that waits in silo.Await hands its partition off as the wait
// begins and is no slow turn, however long it waits; one that blocks
// plainly as long is handed off by the watchdog and reported, as the
// guide says.
func TestATurnWaitingInAwaitIsNoSlowTurn(t *testing.T) {
	var logs syncBuffer
	// A threshold long enough that the Await's turn is not found slow
	// before it reaches Await, its goroutine kept off a core by a loaded
	// machine (CI's one-core step: 130 ms once).
	s := newSilo(t, silo.Config{HandoffThreshold: 200 * time.Millisecond, Logger: newTextLogger(&logs)}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "wait", func(grain.ID) awaiter { return awaiter{} }))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	ctx := ctxT(t)
	awaits, blocks := grain.NewID("wait", "awaits"), grain.NewID("counter", "blocks")
	release := make(chan struct{})
	require.NoError(t, s.Tell(ctx, awaits, awaitRelease(release))) // labels_test.go's
	require.Eventually(t, func() bool { return s.Stats().Handoffs >= 1 }, 5*time.Second, time.Millisecond, "Await hands off at once")
	require.NoError(t, s.Tell(ctx, blocks, hold{until: release})) // deaf to its ctx, as a plain block is
	// The plain wait is handed off once the watchdog finds it past the
	// threshold: by then the Await has waited at least as long.
	require.Eventually(t, func() bool { return s.Stats().Handoffs >= 2 }, 5*time.Second, time.Millisecond)
	close(release)
	_, err := s.Ask(ctx, awaits, "done?") // barriers: both turns over
	require.NoError(t, err)
	_, err = s.Ask(ctx, blocks, get{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Stats().SlowTurns >= 1 }, 5*time.Second, time.Millisecond)
	s.WaitLogged()
	assert.Equal(t, uint64(1), s.Stats().SlowTurns, logs.String())
	assert.Contains(t, logs.String(), "counter/blocks")
	assert.NotContains(t, logs.String(), "wait/awaits")
}
