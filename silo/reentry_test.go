package silo_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// host is a reentrant grain. "work" waits for a gate (running, not waiting
// in a call), then calls the waiter grain, which answers only once host
// has handled a "ping" — sent while work still ran, so it waited in host's
// mailbox. "idle" asks to deactivate on idle.
type host struct {
	mu       *sync.Mutex
	log      *[]string
	gate     <-chan struct{}
	pinged   chan<- struct{}
	activate func(ctx context.Context, c *grain.Context) error
}

func (h *host) note(s string) {
	h.mu.Lock()
	*h.log = append(*h.log, s)
	h.mu.Unlock()
}

func (h *host) OnActivate(ctx context.Context, c *grain.Context) error {
	if h.activate != nil {
		return h.activate(ctx, c)
	}
	return nil
}

func (h *host) OnDeactivate(context.Context, *grain.Context) error {
	h.note("deactivate")
	return nil
}

func (h *host) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	h.note(msg.(string))
	switch msg {
	case "work":
		<-h.gate
		return silo.Call[string](ctx, c.Silo(), grain.NewID("waiter", "w"), "wait for ping")
	case "ping":
		h.pinged <- struct{}{}
	case "idle":
		c.DeactivateOnIdle()
	}
	return "ok", nil
}

// pingWaiter answers once told the ping was handled.
type pingWaiter struct {
	got    chan<- struct{}
	pinged <-chan struct{}
}

func (w pingWaiter) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	w.got <- struct{}{}
	select {
	case <-w.pinged:
		return "pinged", nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type reentryEnv struct {
	s      *silo.Silo
	ctx    context.Context
	id     grain.ID
	gate   chan struct{}
	got    chan struct{}
	mu     sync.Mutex
	log    []string
	builds int
}

func newReentry(t *testing.T, activate func(ctx context.Context, c *grain.Context) error) *reentryEnv {
	e := &reentryEnv{ctx: ctxT(t), id: grain.NewID("host", "h"), gate: make(chan struct{}), got: make(chan struct{}, 4)}
	pinged := make(chan struct{}, 4)
	e.s = newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "host", func(grain.ID) *host {
			e.mu.Lock()
			e.builds++
			e.mu.Unlock()
			return &host{mu: &e.mu, log: &e.log, gate: e.gate, pinged: pinged, activate: activate}
		}, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "waiter", func(grain.ID) pingWaiter { return pingWaiter{got: e.got, pinged: pinged} }))
		require.NoError(t, silo.Register(s, "gated", func(grain.ID) gated { return gated{in: e.got, gate: e.gate} }))
	})
	return e
}

func (e *reentryEnv) logged() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// A message that reached a reentrant grain while its turn ran — not yet
// waiting, so it waited in the mailbox — is let in once the turn waits in a
// call. It used to wait for the turn to end: when that turn waited for it,
// until the call's deadline.
func TestReentrantMailboxIsLetInOnceATurnWaits(t *testing.T) {
	e := newReentry(t, nil)
	worked := make(chan error, 1)
	go func() { _, err := silo.Call[string](e.ctx, e.s, e.id, "work"); worked <- err }()
	require.Eventually(t, func() bool { return len(e.logged()) == 1 }, 5*time.Second, time.Millisecond, "work runs")
	require.NoError(t, e.s.Tell(e.ctx, e.id, "ping")) // work runs: to the mailbox
	require.NoError(t, e.s.Tell(e.ctx, e.id, "second"))
	waitBacklog(t, e.s, 2) // the watchdog handed the partition off: both reached the mailbox
	close(e.gate)          // work calls the waiter, which waits for the ping
	<-e.got
	require.NoError(t, e.s.Tell(e.ctx, e.id, "third")) // work waits: straight in, after the mailbox
	require.NoError(t, <-worked)
	_, err := silo.Call[string](e.ctx, e.s, e.id, "last")
	require.NoError(t, err)
	assert.Equal(t, []string{"work", "ping", "second", "third", "last"}, e.logged(), "in arrival order")
}

// DeactivateOnIdle from a turn that ends while another waits in a call
// deactivates the grain once its last turn ends — it is not idle before —
// and messages that come meanwhile still interleave: the waiting turn may
// be waiting for them. They used to queue for the next activation, which
// waited for the waiting turn.
func TestDeactivateOnIdleWaitsForTheLastTurn(t *testing.T) {
	e := newReentry(t, nil)
	close(e.gate)
	worked := make(chan error, 1)
	go func() { _, err := silo.Call[string](e.ctx, e.s, e.id, "work"); worked <- err }()
	<-e.got // work waits in its call
	_, err := silo.Call[string](e.ctx, e.s, e.id, "idle")
	require.NoError(t, err)
	require.NoError(t, e.s.Tell(e.ctx, e.id, "ping"))
	require.NoError(t, <-worked)
	_, err = silo.Call[string](e.ctx, e.s, e.id, "after")
	require.NoError(t, err)
	assert.Equal(t, []string{"work", "idle", "ping", "deactivate", "after"}, e.logged())
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Equal(t, 2, e.builds, "a fresh instance after the deactivation")
}

// A reentrant kind's messages do not interleave with OnActivate, which may
// still be loading the grain's state: one that comes while OnActivate waits
// in a call waits in the mailbox, and runs once OnActivate has returned.
func TestReentrantMessagesWaitForOnActivate(t *testing.T) {
	var e *reentryEnv
	e = newReentry(t, func(ctx context.Context, c *grain.Context) error {
		_, err := silo.Call[string](ctx, c.Silo(), grain.NewID("gated", "g"), "x")
		e.mu.Lock()
		e.log = append(e.log, "activated")
		e.mu.Unlock()
		return err
	})
	first := make(chan error, 1)
	go func() { _, err := silo.Call[string](e.ctx, e.s, e.id, "first"); first <- err }()
	<-e.got // OnActivate waits in its call
	require.NoError(t, e.s.Tell(e.ctx, e.id, "ping"))
	require.Eventually(t, func() bool { // the ping ran (interleaved), or waits in the mailbox
		return len(e.logged()) > 0 || e.s.Stats().Backlog[0] == 1
	}, 5*time.Second, time.Millisecond)
	close(e.gate)
	require.NoError(t, <-first)
	_, err := silo.Call[string](e.ctx, e.s, e.id, "last")
	require.NoError(t, err)
	assert.Equal(t, []string{"activated", "first", "ping", "last"}, e.logged())
}

// holder is reentrant: "wait" waits in a call to a gated grain; "hold"
// waits for its own gate while holding the turn token.
type holder struct {
	hold <-chan struct{}
	held *atomic.Int32
}

func (h *holder) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch msg {
	case "wait":
		return silo.Call[string](ctx, c.Silo(), grain.NewID("gated", "g"), "x")
	case "hold":
		<-h.hold
		h.held.Add(1)
	}
	return "ok", nil
}

// Interleaved turns each wait for the turn token on a goroutine of their
// own; the kind's backlog limit bounds them as it bounds the mailbox, so a
// flood to a reentrant grain whose turn waits is refused past twice the
// limit instead of taking a goroutine a message. Every message accepted is
// handled once the gates open.
func TestInterleavedTurnsAreBoundedByTheBacklogLimit(t *testing.T) {
	const limit = 5
	hold := make(chan struct{})
	var held atomic.Int32
	e := newHolderWaiting(t, limit, hold, &held)
	s, ctx, id := e.s, e.ctx, e.id
	accepted, refused := 0, 0
	for range 100 {
		switch err := s.Tell(ctx, id, "hold"); {
		case err == nil:
			accepted++
		case errors.Is(err, grain.ErrOverloaded):
			refused++
		default:
			t.Fatal(err)
		}
		// A round trip to another grain of the partition: the owner has
		// taken the hold by the time it answers.
		_, err := s.Ask(ctx, grain.NewID("holder", "other"), "ping")
		require.NoError(t, err)
	}
	backlog := s.Stats().Backlog[0]
	t.Logf("accepted %d, refused %d, in the mailbox %d", accepted, refused, backlog)
	assert.GreaterOrEqual(t, backlog, accepted-limit-1, "at most limit+1 turns in flight besides the waiting one")
	assert.LessOrEqual(t, accepted, 2*limit+2, "interleaved turns and mailbox, each bounded by the limit")
	assert.Positive(t, refused)
	close(hold)
	close(e.gate)
	require.NoError(t, <-e.waited)
	require.Eventually(t, func() bool { return int(held.Load()) == accepted }, 5*time.Second, time.Millisecond)
}

// holderEnv is a silo whose reentrant holder grain has a turn waiting in a
// call to a gated grain, until gate is closed.
type holderEnv struct {
	s      *silo.Silo
	ctx    context.Context
	id     grain.ID
	gate   chan struct{}
	waited chan error // the waiting turn's caller's outcome
}

func newHolderWaiting(t *testing.T, limit int, hold <-chan struct{}, held *atomic.Int32) *holderEnv {
	in := make(chan struct{})
	e := &holderEnv{ctx: ctxT(t), id: grain.NewID("holder", "h"), gate: make(chan struct{}), waited: make(chan error, 1)}
	e.s = newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "holder", func(grain.ID) *holder { return &holder{hold: hold, held: held} },
			silo.WithReentrant(), silo.WithMaxBacklog(limit, silo.RejectNewest)))
		require.NoError(t, silo.Register(s, "gated", func(grain.ID) gated { return gated{in: in, gate: e.gate} }))
	})
	go func() { _, err := silo.Call[string](e.ctx, e.s, e.id, "wait"); e.waited <- err }()
	<-in // the first turn waits in its call
	return e
}

// The largest backlog limits do not wrap when compared with the turns in
// flight: a reentrant grain with an "unbounded" backlog still lets a
// message in while its turn waits. The limit used to be cut to 32 bits,
// and math.MaxInt became -1: nothing interleaved.
func TestReentrantGrainWithTheLargestBacklogStillInterleaves(t *testing.T) {
	for _, limit := range []int{min(1<<31, math.MaxInt), math.MaxInt} { // (1<<31 is MaxInt where int has 32 bits)
		e := newHolderWaiting(t, limit, nil, nil)
		pctx, cancel := context.WithTimeout(e.ctx, 10*time.Second) // a guard: not let in, it would wait for good
		v, err := silo.Call[string](pctx, e.s, e.id, "ping")
		cancel()
		require.NoError(t, err, "limit %d: a message interleaves while the turn waits", limit)
		require.Equal(t, "ok", v)
		close(e.gate)
		require.NoError(t, <-e.waited)
	}
}

// Silo.Deactivate of a reentrant grain whose turn waits in a call takes
// effect once its last turn ends, as DeactivateOnIdle does: meanwhile what
// comes still interleaves, and the waiting turn may be waiting for it.
func TestDeactivateFromOutsideWaitsForAReentrantGrainsLastTurn(t *testing.T) {
	e := newReentry(t, nil)
	close(e.gate)
	worked := make(chan error, 1)
	go func() { _, err := silo.Call[string](e.ctx, e.s, e.id, "work"); worked <- err }()
	<-e.got // work waits in its call
	require.NoError(t, e.s.Deactivate(e.ctx, e.id))
	require.NoError(t, e.s.Tell(e.ctx, e.id, "ping"))
	require.NoError(t, <-worked)
	_, err := silo.Call[string](e.ctx, e.s, e.id, "after")
	require.NoError(t, err)
	assert.Equal(t, []string{"work", "ping", "deactivate", "after"}, e.logged())
}

// derivedCaller (reentrant), on a tell, calls the "callsBack" grain through
// a ctx derived from its turn's, as a handler bounding a query does; that
// grain calls back into it.
type derivedCaller struct{ out chan<- error }

func (g *derivedCaller) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "back" {
		return "here", nil
	}
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := silo.Call[string](bounded, c.Silo(), grain.NewID("callsBack", "b"), c.ID())
	g.out <- err
	return nil, nil
}

type callsBack struct{}

func (callsBack) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	return silo.Call[string](ctx, c.Silo(), msg.(grain.ID), "back")
}

// A call made through a ctx derived from a reentrant grain's tell ctx (an
// ownCtx, found through the derived ctx's Value) is the grain's own call:
// it gives up the turn token, so the callee's call back is let in at once
// instead of waiting behind the turn until the call's deadline.
func TestACallThroughACtxDerivedFromAReentrantTellIsTheGrains(t *testing.T) {
	out := make(chan error, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "derivedCaller", func(grain.ID) *derivedCaller { return &derivedCaller{out} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "callsBack", func(grain.ID) callsBack { return callsBack{} }))
	})
	require.NoError(t, s.Tell(ctxT(t), grain.NewID("derivedCaller", "a"), "go"))
	require.NoError(t, <-out, "the call back was let in while the turn waited")
}
