package silo

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// A stateless worker's activations share an identity, so their waits are
// edges under keys of their own, and a walk that reaches the identity
// finds the activation by where the ask to it waits. Keyed by identity,
// this would read as a cycle whichever activation a's ask waited behind:
// one activation of w waits on a, and a waits on w — on another of w's
// activations, maybe, which waits on nothing and will answer.
func TestADeadlockWalkFindsAStatelessActivationByWhereTheAskWaits(t *testing.T) {
	s := walkSilo(t)

	ctx := t.Context()
	w, a := grain.NewID("w", "x"), grain.NewID("a", "y")
	fromW := queues.NewRequest(ctx, nil) // w's activation in partition 1 calling a
	fromA := queues.NewRequest(ctx, nil) // a calling w
	s.parts[1].waits.start(w, workerWaitKey(w.Hash(), 1), fromW, a, a.Hash(), false, false, nil, nil, false)
	s.waitsOf(a.Hash()).start(a, a.Hash(), fromA, w, w.Hash(), false, false, nil, nil, false)
	// w's ask, queued behind a, whose turn waits on w.
	env := queues.Envelope{Target: a, Hash: a.Hash(), Request: fromW, Meta: &queues.Meta{Sender: w}}
	assert.Nil(t, s.closesCycle(new(walk), &env, nil), "where a's ask waits unknown: no verdict")
	fromA.SetQueuedAt(0)
	assert.Nil(t, s.closesCycle(new(walk), &env, nil), "behind the other activation, which will answer")
	fromA.SetQueuedAt(7)
	assert.Nil(t, s.closesCycle(new(walk), &env, nil), "a partition the silo does not have")
	fromA.SetQueuedAt(1)
	assert.Equal(t, []grain.ID{w, a, w}, s.closesCycle(new(walk), &env, nil), "behind the activation whose call env is")
	fromA.Abandon()
	assert.Nil(t, s.closesCycle(new(walk), &env, nil), "a's caller gave up: it will not wait")
}

// walkSilo returns a silo, not started, of two partitions, for a deadlock
// walk over wait shards built by hand: kind "w" a stateless worker of two
// activations, "a" a plain kind.
func walkSilo(t *testing.T) *Silo {
	s, err := New(Config{Partitions: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	nop := func(grain.ID) *nopGrain { return &nopGrain{} }
	require.NoError(t, Register(s, "w", nop, WithStatelessWorker(2)))
	require.NoError(t, Register(s, "a", nop))
	return s
}

// flaky is a stateless worker's grain that fails some messages.
type flaky struct{}

func (flaky) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if n := msg.(int); n%7 == 0 {
		panic("flaky")
	}
	return nil, nil
}

// The counts senders read are exact: once the silo is quiet they are zero
// in every partition, whatever became of the messages — handled, failed,
// dead letters of a Stop, of a quarantine, or refused at the door.
func TestStatelessWorkerCountsComeBackToZero(t *testing.T) {
	s, err := New(Config{Partitions: 3, Supervision: activation.Supervision{MaxRestarts: 3, Window: time.Hour, Quarantine: time.Hour}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, Register(s, "w", func(grain.ID) flaky { return flaky{} }, WithStatelessWorker(0), WithMaxBacklog(4, RejectNewest)))
	require.NoError(t, Register(s, "a", func(grain.ID) *nopGrain { return &nopGrain{} }))
	require.NoError(t, s.Start())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				id := grain.NewIntID("w", int64(i%5))
				if i%100 == 50 {
					_ = s.Stop(ctx, id)
				}
				if g%2 == 0 {
					_ = s.Tell(ctx, id, i)
				} else {
					_, _ = s.Ask(ctx, id, i)
				}
			}
		})
	}
	wg.Wait()
	// A barrier on every partition: an ask to a grain of each, after
	// everything above was delivered; then every turn has finished.
	for i := range 64 {
		_, err := s.Ask(ctx, grain.NewIntID("a", int64(i)), 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.Shutdown(ctx))
	for i, p := range s.parts {
		assert.Zero(t, p.swQueued.Load(), "partition %d: queued", i)
		assert.Zero(t, p.swBusy.Load(), "partition %d: busy", i)
		for b := range p.swBusyIDs {
			assert.Zero(t, p.swBusyIDs[b].Load(), "partition %d: busy in bucket %d", i, b)
		}
	}
	st := s.Stats()
	assert.NotZero(t, st.DeadLetters[grain.ReasonStopped]+st.DeadLetters[grain.ReasonQuarantined], "some messages were dead letters")
}

// A quarantined stateless identity weighs on its partition's load until
// its quarantine ends, at an idle tick or at the next message.
func TestStatelessWorkerQuarantineEndsInTheLoad(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{Partitions: 2, Clock: clk, IdleQuantum: time.Second,
		Supervision: activation.Supervision{MaxRestarts: 1, Window: time.Hour, Quarantine: 10 * time.Second}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, Register(s, "w", func(grain.ID) flaky { return flaky{} }, WithStatelessWorker(0)))
	require.NoError(t, Register(s, "a", func(grain.ID) *nopGrain { return &nopGrain{} }))
	require.NoError(t, s.Start())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sick := func() (n int64) {
		for _, p := range s.parts {
			for b := range p.swSickIDs {
				n += int64(p.swSickIDs[b].Load())
			}
		}
		return n
	}
	for s.Stats().Stops == 0 {
		_, _ = s.Ask(ctx, grain.NewIntID("w", 1), 7) // 7 panics
	}
	require.EqualValues(t, s.Stats().Stops, sick())
	for range 11 {
		clk.Advance(time.Second)
	}
	// The idle ticks were queued on every partition's control lane; an ask
	// to a grain of each partition, read after them, is a barrier.
	for part := range s.parts {
		for k := int64(0); ; k++ {
			if id := grain.NewIntID("a", k); s.locator.LocateHash(id.Hash()).Partition == part {
				_, err := s.Ask(ctx, id, 1)
				require.NoError(t, err)
				break
			}
		}
	}
	assert.Zero(t, sick())
}

// relay is a grain that holds its turn until a gate opens (hold), or calls
// another grain once it does (callVia); it answers anything else. Each
// tells entered its note as its turn begins.
type relay struct{ entered chan<- string }

type (
	hold    struct{ gate <-chan struct{} }
	callVia struct {
		to   grain.ID
		gate <-chan struct{} // nil: call at once
		note string
	}
)

func (r *relay) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case hold:
		r.entered <- "hold"
		select {
		case <-m.gate:
		case <-ctx.Done():
		}
	case callTwice:
		r.entered <- m.note
		return m.run(ctx, gc)
	case callVia:
		r.entered <- m.note
		if m.gate != nil {
			select {
			case <-m.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return gc.Silo().Ask(ctx, m.to, "ping")
	}
	return "pong", nil
}

// relaySilo starts a silo of two partitions with relay grains of two
// kinds, "w" a stateless worker of two activations and "a" an ordinary
// one, closed when the test ends; ctx bounds the test's calls, and next
// waits for the next turn to begin and checks its note.
func relaySilo(t *testing.T) (*Silo, context.Context, func(want string)) {
	t.Helper()
	s, err := New(Config{Partitions: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	entered := make(chan string, 64)
	mk := func(grain.ID) *relay { return &relay{entered: entered} }
	require.NoError(t, Register(s, "w", mk, WithStatelessWorker(2)))
	require.NoError(t, Register(s, "a", mk))
	require.NoError(t, s.Start())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	next := func(want string) {
		t.Helper()
		select {
		case got := <-entered:
			require.Equal(t, want, got)
		case <-ctx.Done():
			t.Fatalf("no turn began (%s)", want)
		}
	}
	return s, ctx, next
}

// backlog is how many messages wait in s's mailboxes.
func backlog(s *Silo) (n int) {
	for _, b := range s.Stats().Backlog {
		n += b
	}
	return n
}

// idsIn returns n IDs of kind whose identities' own partition is part.
func idsIn(s *Silo, kind string, part, n int) []grain.ID {
	var ids []grain.ID
	for k := int64(0); len(ids) < n; k++ {
		if id := grain.NewIntID(kind, k); s.locator.LocateHash(id.Hash()).Partition == part {
			ids = append(ids, id)
		}
	}
	return ids
}

// A message to a stateless identity goes to an activation that is not in
// a turn, or to a new one, rather than queue behind one that is — however
// many messages of other grains wait in the other partitions' mailboxes,
// which a sender once weighed against that one turn. Two call chains
// through a stateless worker so complete, as in Orleans: a grain the
// worker calls, calling it back from a turn of its own, reaches another
// activation. (The one the worker's turn waits in could only answer once
// that grain had — which waited for it: a deadlock until the call
// timeout, since a stateless worker's waits are not in the deadlock
// graph.)
func TestStatelessWorkerIsNotQueuedBehindItsBusyActivation(t *testing.T) {
	s, ctx, next := relaySilo(t)

	// The worker's identity lives in partition 0 first; partition 1 has a
	// backlog: twenty messages wait behind a held turn there.
	w, a := idsIn(s, "w", 0, 1)[0], idsIn(s, "a", 0, 1)[0]
	ones := idsIn(s, "a", 1, 2)
	held, barrier := ones[0], ones[1]
	release := make(chan struct{})
	defer close(release)
	require.NoError(t, s.Tell(ctx, held, hold{release}))
	next("hold")
	for range 20 {
		require.NoError(t, s.Tell(ctx, held, "ping"))
	}
	_, err := s.Ask(ctx, barrier, "ping") // delivered after the twenty
	require.NoError(t, err)
	require.EqualValues(t, 20, s.parts[1].backlog.Load())

	// a's turn, on a chain of its own, will call w; w's turn calls a.
	openA := make(chan struct{})
	var wg sync.WaitGroup
	var fromA, fromW error
	wg.Go(func() { _, fromA = s.Ask(ctx, a, callVia{to: w, gate: openA, note: "a"}) })
	next("a")
	wg.Go(func() { _, fromW = s.Ask(ctx, w, callVia{to: a, note: "w"}) })
	next("w") // w's first activation, in partition 0, is in its turn
	close(openA)
	wg.Wait()
	require.NoError(t, fromA, "a's call to w reached an activation not in a turn")
	require.NoError(t, fromW)
	assert.Equal(t, 2, s.Stats().Activations["w"], "a second activation answered a")
}

// The owner's half of it: an ask from a grain's turn that meets a
// stateless activation in a turn — the sender chose it before the turn
// began, say, with the message that began it queued ahead — or behind
// messages that may begin one, moves on to another of the identity's
// partitions where its activation is in none and is not quarantined, at
// most maxForwards times. Tells and asks from outside cannot close a
// cycle, and wait where their sender chose.
func TestAnAskFromATurnMovesOnFromAStatelessActivationThatMustWait(t *testing.T) {
	s, err := New(Config{Partitions: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, Register(s, "w", func(grain.ID) *nopGrain { return &nopGrain{} }, WithStatelessWorker(2)))
	p0, p1 := s.parts[0], s.parts[1]
	id := idsIn(s, "w", 0, 1)[0]
	h := id.Hash()
	a := p0.activate(s.kinds["w"], id, h)
	a.Turns = 1 // a turn of it runs off the partition: it waits in a call
	w := newWorker(p0, false)
	caller := &queues.Meta{Sender: grain.NewID("caller", "1")}
	send := func(req *queues.Request, meta *queues.Meta) *queues.Envelope {
		env := &queues.Envelope{Target: id, Hash: h, Msg: "hi", Request: req, Meta: meta}
		p0.enqueue(w, a, env)
		return env
	}
	ask := func() *queues.Request { return queues.NewRequest(t.Context(), nil) }

	env := send(ask(), caller)
	assert.Equal(t, 1, p1.q.Len(), "moved on to the identity's other partition")
	assert.Zero(t, a.Mailbox.Len())
	assert.EqualValues(t, 1, env.Request.Forwards)
	assert.EqualValues(t, 1, p1.swQueued.Load(), "counted there as a sender counts it")

	moved := ask()
	moved.Forwards = maxForwards
	send(moved, caller)
	assert.Equal(t, 1, a.Mailbox.Len(), "moved as often as it may be")

	p1.swBusyIDs[busyBucket(h)].Add(1)
	send(ask(), caller)
	p1.swBusyIDs[busyBucket(h)].Add(-1)
	assert.Equal(t, 2, a.Mailbox.Len(), "the other activation is in a turn too")

	p1.swSickIDs[busyBucket(h)].Add(1)
	send(ask(), caller)
	p1.swSickIDs[busyBucket(h)].Add(-1)
	assert.Equal(t, 3, a.Mailbox.Len(), "the other activation is quarantined")

	send(nil, caller)
	send(ask(), nil)
	assert.Equal(t, 5, a.Mailbox.Len(), "a tell, an ask from outside")
	assert.Equal(t, 1, p1.q.Len())

	// Not in a turn, but with messages waiting (or a restart's backoff to
	// wait out): a turn that one of them begins may wait on the caller.
	// A quarantine of another stateless identity there is no reason to
	// stay.
	a.Turns = 0
	p1.swSickIDs[busyBucket(h)+1].Add(1)
	send(ask(), caller)
	assert.Equal(t, 2, p1.q.Len(), "moved on from the waiting messages")
	assert.Equal(t, 5, a.Mailbox.Len())
}

// A cycle through every activation of a stateless identity at once — each
// in a turn that waits on a grain whose turn, on a chain of its own, calls
// the identity back — fails that last call at once with ErrCallCycle, as a
// cycle through ordinary grains does: the call, with nowhere free to move
// on to, waits behind an activation whose wait is an edge of the graph
// under a key of its own (workerWaitKey), and the walk begins there. The
// activations then get their answers. (Closed the other way — the grain's
// call waiting first, an activation's call last — it still waits for the
// call timeout: the walk cannot tell which activation the grain's call
// waits behind.)
func TestACycleThroughEveryActivationOfAStatelessWorkerFailsAtOnce(t *testing.T) {
	s, ctx, next := relaySilo(t)
	w, a := idsIn(s, "w", 0, 1)[0], idsIn(s, "a", 0, 1)[0]

	openA := make(chan struct{})
	var wg sync.WaitGroup
	var fromA, fromW1, fromW2 error
	wg.Go(func() { _, fromA = s.Ask(ctx, a, callVia{to: w, gate: openA, note: "a"}) })
	next("a") // a's turn holds until openA; then it calls w
	wg.Go(func() { _, fromW1 = s.Ask(ctx, w, callVia{to: a, note: "w1"}) })
	next("w1") // one activation of w calls a, and waits behind a's turn
	wg.Go(func() { _, fromW2 = s.Ask(ctx, w, callVia{to: a, note: "w2"}) })
	next("w2") // so does the other: every activation of w waits on a
	// Both calls in a's mailbox, behind its turn:
	for backlog(s) < 2 {
		require.NoError(t, ctx.Err())
		runtime.Gosched()
	}
	require.Equal(t, 2, s.Stats().Activations["w"])
	close(openA)
	wg.Wait()
	require.ErrorIs(t, fromA, grain.ErrCallCycle, "a's call back closed the cycle")
	var cycle *grain.CallCycleError
	require.ErrorAs(t, fromA, &cycle)
	assert.Equal(t, []grain.ID{a, w, a}, cycle.Chain)
	require.NoError(t, fromW1, "answered once a's turn had failed its call")
	require.NoError(t, fromW2)
}

// callTwice asks first with msg, then, if then is not zero, asks then
// "ping"; it tells entered its note as its turn begins.
type callTwice struct {
	first grain.ID
	msg   any
	then  grain.ID
	note  string
}

func (c callTwice) run(ctx context.Context, gc *grain.Context) (any, error) {
	if _, err := gc.Silo().Ask(ctx, c.first, c.msg); err != nil || c.then.IsZero() {
		return nil, err
	}
	return gc.Silo().Ask(ctx, c.then, "ping")
}

// A cycle that a stateless activation's own call closes fails at once:
// a's turn calls w, whose ask waits behind one of w's activations — busy,
// as every one is, each in a call of its own — and that activation's turn
// then calls a. The walk from its call finds a waiting on w, and, by
// where a's ask waits, that it waits on this very activation. (Before,
// the walk stopped at w, which of its activations a waited on unknown,
// and both calls waited for their deadline.) The other activation's call
// to a is no cycle: it waits, and is answered.
func TestACycleAStatelessActivationsOwnCallClosesFailsAtOnce(t *testing.T) {
	s, ctx, next := relaySilo(t)
	w, a := idsIn(s, "w", 0, 1)[0], idsIn(s, "a", 0, 1)[0]
	holders := idsIn(s, "a", 1, 2)

	gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var wg sync.WaitGroup
	fromW := make([]error, 2)
	for i, note := range []string{"w1", "w2"} {
		wg.Go(func() {
			_, fromW[i] = s.Ask(ctx, w, callTwice{first: holders[i], msg: hold{gate: gates[i]}, then: a, note: note})
		})
		next(note)
		next("hold") // the activation waits on its holder
	}
	require.Equal(t, 2, s.Stats().Activations["w"])
	var fromA error
	wg.Go(func() { _, fromA = s.Ask(ctx, a, callVia{to: w, note: "a"}) })
	next("a")
	for backlog(s) < 1 { // a's ask, behind one of w's activations
		require.NoError(t, ctx.Err())
		runtime.Gosched()
	}
	close(gates[0])
	close(gates[1])
	wg.Wait()
	require.NoError(t, fromA, "answered once the activation it waited behind had failed its call")
	failed := 0
	for _, err := range fromW {
		if err == nil {
			continue
		}
		failed++
		require.ErrorIs(t, err, grain.ErrCallCycle)
		var cycle *grain.CallCycleError
		require.ErrorAs(t, err, &cycle)
		assert.Equal(t, []grain.ID{w, a, w}, cycle.Chain)
	}
	assert.Equal(t, 1, failed, "only the activation a's ask waited behind closed a cycle")
}

// A walk tells a stateless identity's activations apart along its whole
// path, not only where it reaches one: a cycle may pass through two of
// them — w's activation in partition 0 waits on p, p on w's in partition
// 1, which waits on q, which waits on the first. (Telling them apart only
// by where an ask waited, the walk took the second for the first, on the
// way there already, and gave no verdict: the chaos program's fan-outs,
// every call waiting for its deadline, once in 70 runs.)
func TestADeadlockWalkTellsAStatelessIdentitysActivationsApartAlongItsPath(t *testing.T) {
	s := walkSilo(t)
	ctx := t.Context()
	w, p, q := grain.NewID("w", "x"), grain.NewID("a", "p"), grain.NewID("a", "q")
	wAt := func(part int) (*waitShard, uint64) { return &s.parts[part].waits, workerWaitKey(w.Hash(), part) }
	call := func(from grain.ID, shard *waitShard, key uint64, to grain.ID) *queues.Request {
		r := queues.NewRequest(ctx, nil)
		shard.start(from, key, r, to, to.Hash(), false, false, nil, nil, false)
		return r
	}
	send := func(from, to grain.ID, r *queues.Request) *queues.Envelope {
		return &queues.Envelope{Target: to, Hash: to.Hash(), Request: r, Meta: &queues.Meta{Sender: from}}
	}
	shard0, key0 := wAt(0)
	shard1, key1 := wAt(1)
	fromW0 := call(w, shard0, key0, p) // w's activation in partition 0 waits on p
	fromW1 := call(w, shard1, key1, q) // the one in partition 1 on q
	fromQ := call(q, s.waitsOf(q.Hash()), q.Hash(), w)
	fromQ.SetQueuedAt(0) // q's ask waits behind w's activation in partition 0
	fromP := call(p, s.waitsOf(p.Hash()), p.Hash(), w)

	// p's ask, about to wait behind w's activation in partition 1.
	assert.Equal(t, []grain.ID{p, w, q, w, p}, s.closesCycle(new(walk), send(p, w, fromP), s.parts[1]),
		"the cycle through both activations")
	assert.Equal(t, []grain.ID{p, w, p}, s.closesCycle(new(walk), send(p, w, fromP), s.parts[0]),
		"behind the other one, which waits on p")

	// w's ask from partition 1, about to wait behind q's turn, which waits
	// on w's other activation: the walk goes on through it.
	fromP.SetQueuedAt(1)
	assert.Equal(t, []grain.ID{w, q, w, p, w}, s.closesCycle(new(walk), send(w, q, fromW1), nil),
		"the caller's identity, but another activation: on through it")
	fromP.SetQueuedAt(0)
	assert.Nil(t, s.closesCycle(new(walk), send(w, q, fromW1), nil),
		"p waits behind the activation in partition 0 too: a loop that w's call is not on")

	fromW0.Abandon()
	fromP.SetQueuedAt(1)
	assert.Nil(t, s.closesCycle(new(walk), send(w, q, fromW1), nil), "one call on the way given up on: no verdict")
}

// A reentrant stateless activation being stopped lets nothing in but calls
// back on its waiting turns' chains, so the calls it had out as the Stop
// came are edges of a grain that holds what comes for it — under the key
// its calls were made under, its own (waitKeyOf). Marked under its
// identity's hash instead, they stayed edges of a grain that lets others
// in: a's ask, held behind the stopping activation whose turn waits on a,
// was taken for one that would be let in, and the cycle waited for its
// deadlines (the chaos program with -kinds swre -stop 50: dozens of asks
// a run).
func TestAStoppedReentrantStatelessActivationHoldsTheCallsItHadOut(t *testing.T) {
	s, err := New(Config{Partitions: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	nop := func(grain.ID) *nopGrain { return &nopGrain{} }
	require.NoError(t, Register(s, "w", nop, WithStatelessWorker(2), WithReentrant()))
	require.NoError(t, Register(s, "a", nop))

	ctx := t.Context()
	w, a := grain.NewID("w", "x"), grain.NewID("a", "y")
	p := s.parts[1]
	act := p.activate(s.kinds["w"], w, w.Hash()) // w's activation in partition 1
	require.NoError(t, act.Transition(activation.Active))
	act.Turns = 1 // its turn waits on a, in a call made before the Stop
	fromW := queues.NewRequest(ctx, nil)
	p.waits.start(w, p.waitKeyOf(act), fromW, a, a.Hash(), false, false, &act.extra().held, nil, false)
	fromA := queues.NewRequest(ctx, nil) // a's turn calls w, queued behind that activation
	s.waitsOf(a.Hash()).start(a, a.Hash(), fromA, w, w.Hash(), false, false, nil, nil, false)
	fromA.SetQueuedAt(1)
	env := queues.Envelope{Target: a, Hash: a.Hash(), Request: fromW, Meta: &queues.Meta{Sender: w}}
	assert.Nil(t, s.closesCycle(new(walk), &env, nil), "w lets a's call in while its turn waits")

	p.halt(act, grain.DeactivationStopped) // Silo.Stop
	assert.Equal(t, []grain.ID{w, a, w}, s.closesCycle(new(walk), &env, nil),
		"stopping, w holds a's call until its turn ends, which waits on a")
}
