package silo_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// peerMsg makes a grain wait at a barrier, then call the next grain.
type peerMsg struct {
	arrived chan<- struct{}
	begin   <-chan struct{}
	next    grain.ID
}

func peerKind(s *silo.Silo, t *testing.T) {
	require.NoError(t, silo.Register(s, "peer", func(grain.ID) grain.Func {
		return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
			switch m := msg.(type) {
			case peerMsg:
				m.arrived <- struct{}{}
				<-m.begin // every grain of the ring is inside its turn
				return silo.Call[string](ctx, c.Silo(), m.next, "ping")
			case string:
				return "pong from " + c.ID().Key(), nil
			}
			return nil, nil
		}
	}))
}

// Rings of grains whose turns, on separate call chains, each call the next:
// a deadlock no single chain shows. The call that closes the ring fails at
// once with ErrCallCycle (a dead letter, reason deadlock), and every other
// call completes — instead of all of them waiting for the call timeout.
func TestCrossChainDeadlockFailsFast(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := newSilo(t, silo.Config{}, func(s *silo.Silo) { peerKind(s, t) })
			ctx := ctxT(t) // a hang fails the test at its deadline
			dl := s.SubscribeDeadLetters(16)
			ids := make([]grain.ID, n)
			for i := range ids {
				ids[i] = grain.NewID("peer", fmt.Sprint(i))
			}
			arrived, start := make(chan struct{}, n), make(chan struct{})
			errs := make(chan error, n)
			for i, id := range ids {
				go func() {
					_, err := s.Ask(ctx, id, peerMsg{arrived, start, ids[(i+1)%n]})
					errs <- err
				}()
			}
			for range n {
				<-arrived
			}
			close(start)
			var failed []error
			for range n {
				if err := <-errs; err != nil {
					failed = append(failed, err)
				}
			}
			require.Len(t, failed, 1, "exactly the call that closed the ring fails: %v", failed)
			err := failed[0]
			require.ErrorIs(t, err, grain.ErrCallCycle)
			var cycle *grain.CallCycleError
			require.ErrorAs(t, err, &cycle)
			assert.Len(t, cycle.Chain, n+1, "the ring, from the caller back to it: %v", cycle.Chain)
			assert.Equal(t, cycle.Chain[0], cycle.Chain[n])
			d := <-dl.C
			assert.Equal(t, grain.ReasonDeadlock, d.Reason)
			assert.Equal(t, uint64(1), s.Stats().DeadLetters[grain.ReasonDeadlock])
		})
	}
}

// dagMsg calls on down the grains with higher numbers: call chains that
// cross and queue behind each other, but never in a cycle.
type dagMsg struct{ depth int }

// No false alarm: many chains of calls that wait behind each other (only
// ever towards higher-numbered grains) all complete — with turns that fan
// out too, to two grains at once, waiting for both replies or the first.
func TestNoDeadlockReportedWithoutACycle(t *testing.T) {
	for _, fan := range []bool{false, true} {
		t.Run(fmt.Sprintf("fan-out=%v", fan), func(t *testing.T) { noDeadlockInADAG(t, fan) })
	}
}

func noDeadlockInADAG(t *testing.T, fan bool) {
	const grains, callers, calls = 12, 40, 50
	var falseAlarms atomic.Int64
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "dag", func(id grain.ID) grain.Func {
			me, _ := id.IntKey()
			call := func(ctx context.Context, c *grain.Context, depth int) (int, error) {
				next := me + 1 + rand.Int64N(grains-1-me)
				n, err := silo.Call[int](ctx, s, grain.NewIntID("dag", next), dagMsg{depth})
				if errors.Is(err, grain.ErrCallCycle) {
					falseAlarms.Add(1)
				}
				return n, err
			}
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				m := msg.(dagMsg)
				if m.depth == 0 || me == grains-1 {
					runtimeYield()
					return 1, nil
				}
				if !fan || rand.IntN(2) == 0 {
					n, err := call(ctx, c, m.depth-1)
					return n + 1, err
				}
				type reply struct {
					n   int
					err error
				}
				replies := make(chan reply, 2)
				for range 2 {
					go func() { n, err := call(ctx, c, m.depth-1); replies <- reply{n, err} }()
				}
				r := <-replies
				if rand.IntN(2) == 0 { // and the other
					r2 := <-replies
					r.n, r.err = max(r.n, r2.n), errors.Join(r.err, r2.err)
				}
				return r.n + 1, r.err
			}
		}))
	})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for c := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for range calls {
				_, err := s.Ask(ctx, grain.NewIntID("dag", r.Int64N(grains)), dagMsg{depth: 1 + r.IntN(4)})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, falseAlarms.Load())
	require.Zero(t, s.Stats().DeadLetters[grain.ReasonDeadlock])
}

// A call answered a moment ago is not a wait: X calls Y, and Y, in the turn
// right after the one that answered, calls X — which may still be in its own
// turn, its call returned but not yet gone from the wait-for graph. Only a
// call not yet answered counts (queues.Request.Resolved). (Each round waits
// for Y's call back to end: the next round's call from X to Y, made while Y
// waited on X, would be a real deadlock.)
func TestAnAnsweredCallIsNoWait(t *testing.T) {
	const pairs, rounds = 8, 100
	backDone := make([]chan struct{}, pairs)
	for i := range backDone {
		backDone[i] = make(chan struct{}, 1)
	}
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "x", func(id grain.ID) grain.Func {
			y := grain.NewID("y", id.Key())
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				if msg == "start" {
					_, err := silo.Call[int](ctx, c.Silo(), y, "work")
					runtimeYield() // still in the turn while Y calls back
					return nil, err
				}
				return 1, nil // Y's call back
			}
		}))
		require.NoError(t, silo.Register(s, "y", func(id grain.ID) grain.Func {
			x := grain.NewID("x", id.Key())
			k, _ := strconv.Atoi(id.Key())
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				if msg == "work" {
					// Next turn, right after this one answers X.
					return 1, c.Silo().Tell(ctx, c.ID(), "call x")
				}
				_, err := silo.Call[int](ctx, c.Silo(), x, "back")
				assert.NoError(t, err)
				backDone[k] <- struct{}{}
				return nil, err
			}
		}))
	})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for p := range pairs {
		wg.Go(func() {
			for range rounds {
				_, err := s.Ask(ctx, grain.NewID("x", fmt.Sprint(p)), "start")
				assert.NoError(t, err)
				select {
				case <-backDone[p]:
				case <-ctx.Done():
					t.Error("Y's call back never ended")
					return
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, s.Stats().DeadLetters[grain.ReasonDeadlock])
}

// stoppingCycle is a silo with two kinds for a cycle through a reentrant
// grain being stopped: reent/r's "callP" asks plain/p "ping" — after it
// tells rIn and waits for rGate, when rIn is not nil — and plain/p's other
// messages tell pIn and wait for pGate, then ask reent/r.
type stoppingCycle struct {
	s                   *silo.Silo
	r, p, q             grain.ID
	rIn, pIn, qIn       chan struct{}
	rGate, pGate, qGate chan struct{}
}

func newStoppingCycle(t *testing.T, rHolds bool) *stoppingCycle {
	c := &stoppingCycle{r: grain.NewID("reent", "r"), p: grain.NewID("plain", "p"), q: grain.NewID("slow", "q"),
		pIn: make(chan struct{}, 1), pGate: make(chan struct{}), rGate: make(chan struct{}),
		qIn: make(chan struct{}, 1), qGate: make(chan struct{})}
	if rHolds {
		c.rIn = make(chan struct{}, 1)
	}
	c.s = newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "reent", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "fanout" { // asks p and q at once; the first reply is the answer
					replies := make(chan string, 2)
					for _, to := range []grain.ID{c.p, c.q} {
						go func() { v, _ := silo.Call[string](ctx, s, to, "ping"); replies <- v }()
					}
					return <-replies, nil
				}
				if msg == "fanall" { // asks p and q at once and waits for both
					errs := make(chan error, 2)
					for _, to := range []grain.ID{c.p, c.q} {
						go func() { _, err := silo.Call[string](ctx, s, to, "ping"); errs <- err }()
					}
					return nil, errors.Join(<-errs, <-errs)
				}
				if msg != "callP" {
					return "r-ok", nil
				}
				if c.rIn != nil {
					c.rIn <- struct{}{}
					<-c.rGate
				}
				return silo.Call[string](ctx, gc.Silo(), c.p, "ping")
			}
		}, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "plain", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "ping" {
					return "pong", nil
				}
				c.pIn <- struct{}{}
				<-c.pGate
				return silo.Call[string](ctx, gc.Silo(), c.r, "hi")
			}
		}))
		require.NoError(t, silo.Register(s, "slow", gatedKind(c.qIn, c.qGate, "q-ok")))
	})
	return c
}

// holdP starts p's turn, which holds until pGate opens and then calls r,
// on a chain of its own; its ask's outcome comes on the channel. ctx
// bounds the test's calls.
func (c *stoppingCycle) holdP(t *testing.T) (context.Context, <-chan error) {
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	t.Cleanup(cancel)
	fromP := make(chan error, 1)
	go func() { _, err := c.s.Ask(ctx, c.p, "call r"); fromP <- err }()
	<-c.pIn
	return ctx, fromP
}

// askR asks r msg, on a chain of its own; its outcome comes on the channel.
func (c *stoppingCycle) askR(ctx context.Context, msg string) <-chan error {
	return askAsync(ctx, c.s, c.r, msg)
}

// askAsync asks id msg from a goroutine of its own (a chain of its own);
// the ask's outcome comes on the channel.
func askAsync(ctx context.Context, s *silo.Silo, id grain.ID, msg any) <-chan error {
	out := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, msg); out <- err }()
	return out
}

// stop stops r, and returns once r's owner has taken the Stop.
func (c *stoppingCycle) stop(ctx context.Context, t *testing.T) {
	require.NoError(t, c.s.Stop(ctx, c.r))
	_, err := c.s.ActiveGrains(ctx, "reent") // a barrier: r's owner has taken the Stop
	require.NoError(t, err)
}

// A reentrant grain being stopped lets in nothing from other chains: what
// comes after the Stop waits for its next instance, and the Stop for its
// turns. So when its waiting turn's callee, in a turn of another chain,
// calls it back, the cycle is a deadlock like any: that call fails at once
// with ErrCallCycle, the waiting turn is answered, and the grain stops.
// (Its waits were no part of the graph: both calls waited for their
// deadlines.)
func TestACallBackIntoAStoppingReentrantGrainThatWaitsOnItFailsFast(t *testing.T) {
	c := newStoppingCycle(t, false)
	s, r, p := c.s, c.r, c.p
	ctx, fromP := c.holdP(t)
	fromR := c.askR(ctx, "callP")
	waitBacklog(t, s, 1) // r's turn waits on p, its call behind p's turn
	c.stop(ctx, t)
	close(c.pGate) // p calls r, which is stopping and waits on p: the cycle closes
	err := <-fromP
	requireCycle(t, err, p, r, p)
	require.NoError(t, <-fromR, "r's call answered once p's turn had ended")
	got, err := silo.Call[string](ctx, s, r, "hi")
	require.NoError(t, err)
	assert.Equal(t, "r-ok", got, "a fresh instance, after the stop")
}

// The same cycle, closed the other way: the stopping reentrant grain's turn,
// still running when the Stop came, calls a grain whose turn waits on a
// call back into it, held since the Stop. Its call fails at once with
// ErrCallCycle, and, the grain gone, the held call reaches a fresh
// instance. (A grain being stopped marks its waits as an activating one
// does: waitShard.hold.)
func TestAStoppingReentrantGrainsCallThatClosesACycleFailsFast(t *testing.T) {
	c := newStoppingCycle(t, true)
	s, r, p, pIn, rIn, gateP, gateR := c.s, c.r, c.p, c.pIn, c.rIn, c.pGate, c.rGate
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromR := c.askR(ctx, "callP")
	<-rIn // r's turn runs, not in a call yet
	fromP := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, p, "call r"); fromP <- err }()
	<-pIn // p's turn holds
	require.NoError(t, s.Stop(ctx, r))
	_, err := s.ActiveGrains(ctx, "reent") // a barrier: r's owner has taken the Stop
	require.NoError(t, err)
	close(gateP)         // p calls r, held by the Stop
	waitBacklog(t, s, 1) // p's call waits for r's next instance
	close(gateR)         // r's turn calls p, which waits on r: the cycle closes
	err = <-fromR
	requireCycle(t, err, r, p, r)
	require.NoError(t, <-fromP, "p's call answered by r's next instance")
}

// A stopping reentrant grain's message waits for all its turns to end, so
// one turn stuck in the cycle is enough: with two turns waiting on p, p's
// call back fails at once. (An edge of several calls gave no verdict.)
func TestACallBackIntoAStoppingReentrantGrainWithTwoTurnsWaitingFailsFast(t *testing.T) {
	c := newStoppingCycle(t, false)
	s, r := c.s, c.r
	ctx, fromP := c.holdP(t)
	fromR := make(chan error, 2)
	for range 2 {
		go func() { _, err := s.Ask(ctx, r, "callP"); fromR <- err }()
	}
	waitBacklog(t, s, 2) // r's two turns wait on p, their calls behind p's turn
	c.stop(ctx, t)
	close(c.pGate)
	err := <-fromP
	require.ErrorIs(t, err, grain.ErrCallCycle)
	require.NoError(t, <-fromR)
	require.NoError(t, <-fromR)
}

// But a turn that fans out may wait for its first reply only: it is stuck
// only if every call it made is. r's turn asks p, whose turn calls r back,
// and q, which answers once let: p's call back waits — no verdict — and
// is answered by r's next instance once q's reply has ended r's turn.
func TestAFanOutOfAStoppingReentrantGrainIsNoCycleWhileOneCallMayBeAnswered(t *testing.T) {
	c := newStoppingCycle(t, false)
	s, r := c.s, c.r
	ctx, fromP := c.holdP(t)
	fromR := make(chan any, 1)
	go func() {
		v, err := s.Ask(ctx, r, "fanout")
		if err != nil {
			v = err
		}
		fromR <- v
	}()
	<-c.qIn              // q's turn holds
	waitBacklog(t, s, 1) // r's ask to p waits behind p's turn
	c.stop(ctx, t)
	close(c.pGate)
	waitBacklog(t, s, 2) // p's call back waits for r's next instance: walked, no verdict
	select {
	case err := <-fromP:
		t.Fatalf("p's call back ended while r's turn could still end: %v", err)
	default:
	}
	close(c.qGate) // q answers: r's turn ends, r stops, p's call reaches its next instance
	require.NoError(t, <-fromP)
	assert.Equal(t, "q-ok", <-fromR)
}

// fanOutCycle is a silo for a cycle through a fan-out: fan/a's "fanout"
// asks hold/b and slow/c at once and waits for both replies (as Orleans
// code awaits Task.WhenAll), or for the first, if its message says so;
// b's "call a" tells bIn, waits for bGate and asks a; c tells cIn and
// waits for cGate.
type fanOutCycle struct {
	s           *silo.Silo
	a, b, c     grain.ID
	bIn, cIn    chan struct{}
	bGate, cGte chan struct{}
	calls       chan error   // the outcome of each call a's turns make
	pings       atomic.Int32 // the pings b ran
}

func newFanOutCycle(t *testing.T) *fanOutCycle {
	f := &fanOutCycle{a: grain.NewID("fan", "a"), b: grain.NewID("hold", "b"), c: grain.NewID("slow", "c"),
		bIn: make(chan struct{}, 1), cIn: make(chan struct{}, 1), bGate: make(chan struct{}), cGte: make(chan struct{}),
		calls: make(chan error, 4)}
	f.s = newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "fan", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "a-ok", nil
				}
				errs := make(chan error, 2)
				for _, to := range []grain.ID{f.b, f.c} {
					go func() {
						_, err := silo.Call[string](ctx, s, to, "ping")
						errs <- err
						f.calls <- err
					}()
				}
				if msg == "first" {
					return nil, <-errs
				}
				return nil, errors.Join(<-errs, <-errs)
			}
		}))
		require.NoError(t, silo.Register(s, "hold", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				switch msg {
				case "ping":
					f.pings.Add(1)
					return "pong", nil
				case "barrier":
					return nil, nil
				}
				f.bIn <- struct{}{}
				<-f.bGate
				return silo.Call[string](ctx, gc.Silo(), f.a, "hi")
			}
		}))
		require.NoError(t, silo.Register(s, "slow", gatedKind(f.cIn, f.cGte, "c-ok")))
	})
	return f
}

// start holds b's turn, then has a fan out (msg: "fanout" or "first") and
// b call a: a waits on b and c, b on a. It returns the outcomes of the
// asks to a and to b.
func (f *fanOutCycle) start(ctx context.Context, t *testing.T, msg string) (fromA, fromB <-chan error) {
	a, b := make(chan error, 1), make(chan error, 1)
	go func() { _, err := f.s.Ask(ctx, f.b, "call a"); b <- err }()
	<-f.bIn
	go func() { _, err := f.s.Ask(ctx, f.a, msg); a <- err }()
	<-f.cIn
	waitBacklog(t, f.s, 1) // a's call to b waits behind b's turn
	close(f.bGate)
	waitBacklog(t, f.s, 2) // b's call to a waits behind a's turn: walked, no verdict
	select {
	case err := <-a:
		t.Fatalf("a's turn ended while c could still answer: %v", err)
	case err := <-b:
		t.Fatalf("b's call to a ended while c could still answer: %v", err)
	default:
	}
	return a, b
}

// A turn that fans out waits on several calls; while c's is out, a walk
// through a cannot tell which one its turn waits for — c's reply may end
// it — and b's call back waits, no verdict. Once c has answered, a waits
// on b alone and b on a: a deadlock, found when c's call ends (the owner
// behind which a's call waits walks again from it). a's call to b, the one
// left, fails at once with ErrCallCycle, and b's call to a is answered.
// (Nothing walked again: both waited for their deadlines.)
func TestAFanOutDownToTheCallThatClosesACycleFailsFast(t *testing.T) {
	f := newFanOutCycle(t)
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromA, fromB := f.start(ctx, t, "fanout")
	close(f.cGte) // c answers: a waits on b alone
	err := <-fromA
	requireCycle(t, err, f.a, f.b, f.a)
	require.NoError(t, <-fromB, "b's call to a answered once a's turn had ended")
	_, err = f.s.Ask(ctx, f.b, "barrier") // b has taken whatever waited in its mailbox
	require.NoError(t, err)
	assert.Zero(t, f.pings.Load(), "the failed ask is not run")
	st := f.s.Stats()
	assert.Equal(t, uint64(1), st.DeadLetters[grain.ReasonDeadlock])
	assert.Zero(t, st.DeadLetters[grain.ReasonExpired], "the failed ask left b's mailbox: no second dead letter")
}

// A turn that takes the first reply only ends at c's. Its call to b, left
// out, cannot be answered before then — b answers nothing until a's turn
// ends, which ends the call's ctx — so whichever comes first, it is one
// dead letter at most: failed by the walk taken again when c's call
// ended (deadlock), dropped by b finding its caller gone (expired), or,
// its caller's goroutine slow to see its ctx end, run. a's ask and b's
// both succeed.
func TestAFanOutThatTookItsFirstReplyLeavesOneDeadLetterAtMost(t *testing.T) {
	f := newFanOutCycle(t)
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromA, fromB := f.start(ctx, t, "first")
	close(f.cGte)
	require.NoError(t, <-fromA)
	require.NoError(t, <-fromB)
	var left error
	for range 2 {
		if err := <-f.calls; err != nil {
			left = err
		}
	}
	_, err := f.s.Ask(ctx, f.b, "barrier") // b has taken a's call, or dropped it
	require.NoError(t, err)
	d := f.s.Stats().DeadLetters
	assert.LessOrEqual(t, d[grain.ReasonDeadlock]+d[grain.ReasonExpired], uint64(1), "%v", d)
	if errors.Is(left, grain.ErrCallCycle) {
		assert.Zero(t, f.pings.Load(), "the failed ask is not run")
		assert.Equal(t, uint64(1), d[grain.ReasonDeadlock], "%v", d)
		assert.Zero(t, d[grain.ReasonExpired], "the failed ask left b's mailbox: no second dead letter")
	}
}

// And a turn that waits for every reply is stuck once the call left is:
// when q has answered, r's turn waits on p alone, and p on r, held by the
// Stop. r's call to p, the one left, fails at once (the walk taken again
// as q's call ended), r stops, and p's call back reaches its next
// instance. (Nothing walked again: both waited for their deadlines.)
func TestAStoppingReentrantGrainsFanOutDownToTheCallThatClosesACycleFailsFast(t *testing.T) {
	c := newStoppingCycle(t, false)
	s, r, p := c.s, c.r, c.p
	ctx, fromP := c.holdP(t)
	fromR := c.askR(ctx, "fanall")
	<-c.qIn
	waitBacklog(t, s, 1) // r's ask to p waits behind p's turn
	c.stop(ctx, t)
	close(c.pGate)
	waitBacklog(t, s, 2) // p's call back waits for r's next instance: walked, no verdict
	close(c.qGate)       // q answers: r's turn waits on p alone
	err := <-fromR
	requireCycle(t, err, r, p, r)
	require.NoError(t, <-fromP, "p's call back answered by r's next instance")
}

// A turn that fans out is stuck once every call of it is, each behind a
// grain whose turn calls it back: a room asks two players at once and
// waits for both, while each player's turn, on a chain of its own, calls
// the room. The player call that closes the second cycle fails at once
// (the room's turn is stuck only if both its calls are); that player's
// turn ends and answers the room, whose turn is then down to the other
// player: a cycle of its own, which fails one ask too — the room's call
// left, walked again as the answered call ended, or the other player's
// call, walked as it reaches the room, whichever owner comes first (a
// player's call on its way to the room is already an edge, and may be
// what made the first walk's verdict). Two cycles, two dead letters,
// and no call waits for its deadline. (Walks through a grain with
// several calls out gave no verdict: every call waited for its
// deadline.)
func TestAFanOutWhoseEveryCallIsStuckFailsFast(t *testing.T) {
	room := grain.NewID("room", "r")
	in, gate := make(chan struct{}, 2), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "room", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "room-ok", nil
				}
				errs := make(chan error, 2)
				for _, p := range []string{"1", "2"} {
					go func() {
						_, err := silo.Call[string](ctx, s, grain.NewID("player", p), "ping")
						errs <- err
					}()
				}
				return nil, errors.Join(<-errs, <-errs)
			}
		}))
		require.NoError(t, silo.Register(s, "player", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "ping" {
					return "pong", nil
				}
				in <- struct{}{}
				<-gate
				return silo.Call[string](ctx, gc.Silo(), room, "hi")
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	players := make(chan error, 2)
	for _, p := range []string{"1", "2"} {
		go func() { _, err := s.Ask(ctx, grain.NewID("player", p), "call room"); players <- err }()
	}
	<-in
	<-in
	fromRoom := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, room, "fanout"); fromRoom <- err }()
	waitBacklog(t, s, 2) // the room's asks wait behind the players' turns
	close(gate)          // each player calls the room
	roomFailed := false
	if err := <-fromRoom; err != nil {
		require.ErrorIs(t, err, grain.ErrCallCycle)
		roomFailed = true
	}
	var failed int
	for range 2 {
		if err := <-players; err != nil {
			require.ErrorIs(t, err, grain.ErrCallCycle)
			failed++
		}
	}
	if roomFailed {
		assert.Equal(t, 1, failed, "the player call that closed the second cycle; the other answered once the room's turn had ended")
	} else {
		assert.Equal(t, 2, failed, "each player's call closed a cycle of its own; the room's calls were answered")
	}
	assert.Equal(t, uint64(2), s.Stats().DeadLetters[grain.ReasonDeadlock])
}

// requireCycle checks that err is a call cycle's, naming chain.
func requireCycle(t *testing.T, err error, chain ...grain.ID) {
	t.Helper()
	require.ErrorIs(t, err, grain.ErrCallCycle)
	var cyc *grain.CallCycleError
	require.ErrorAs(t, err, &cyc)
	assert.Equal(t, chain, cyc.Chain)
}

// callsBackKind makes a kind whose turns answer "ping" with "pong" and, to
// any other message, tell in, wait for gate and ask to call.
func callsBackKind(s *silo.Silo, in chan<- struct{}, gate <-chan struct{}, to grain.ID, call string) func(grain.ID) grain.Func {
	return func(grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			if msg == "ping" {
				return "pong", nil
			}
			in <- struct{}{}
			<-gate
			return silo.Call[string](ctx, s, to, call)
		}
	}
}

// gatedKind makes a kind whose turns tell in, wait for gate and answer reply.
func gatedKind(in chan<- struct{}, gate <-chan struct{}, reply string) func(grain.ID) grain.Func {
	return func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) {
			in <- struct{}{}
			<-gate
			return reply, nil
		}
	}
}

// A cycle through a stateless activation that took its call at once: p's
// turn calls q, q's turn (another chain) calls the stateless w, whose
// idle activation runs the call at once and calls p back, behind p's
// turn. The walk from p's call finds which of w's activations q's call
// runs on, and fails p's call at once. (Only an ask queued behind an
// activation recorded where it was: this one waited for its deadline.)
func TestACycleThroughAStatelessActivationThatTookItsCallAtOnceFailsFast(t *testing.T) {
	p, q, w := grain.NewID("hold", "p"), grain.NewID("hold", "q"), grain.NewID("sw", "w")
	in := map[grain.ID]chan struct{}{p: make(chan struct{}, 1), q: make(chan struct{}, 1)}
	gate := map[grain.ID]chan struct{}{p: make(chan struct{}), q: make(chan struct{})}
	next := map[grain.ID]grain.ID{p: q, q: w}
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hold", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "hi from " + id.Key(), nil
				}
				in[id] <- struct{}{}
				<-gate[id]
				return silo.Call[string](ctx, s, next[id], "hi")
			}
		}))
		require.NoError(t, silo.Register(s, "sw", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				return silo.Call[string](ctx, s, p, "hi") // behind p's turn
			}
		}, silo.WithStatelessWorker(2)))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromP, fromQ := make(chan error, 1), make(chan error, 1)
	go func() { _, err := s.Ask(ctx, p, "go"); fromP <- err }()
	<-in[p]
	go func() { _, err := s.Ask(ctx, q, "go"); fromQ <- err }()
	<-in[q]
	close(gate[q])       // q calls w, whose activation runs it at once and calls p
	waitBacklog(t, s, 1) // w's call waits behind p's turn
	close(gate[p])       // p calls q, whose turn waits on w: the cycle closes
	requireCycle(t, <-fromP, p, q, w, p)
	require.NoError(t, <-fromQ, "q's call to w answered once p's turn had ended")
}

// A fan-out left waiting on calls that are all stuck, one of which runs
// in its target rather than waiting behind it: a waits for c, b and d;
// c's turn, running a's call, calls d, whose turn (another chain) calls a
// back. While b's call is out a may go on at its reply (no verdict); once
// b answers, a's turn is stuck for good. Its calls left are walked again
// first: a's call to d, waiting behind d, fails (a turn that took its
// first reply and went on would have lost nothing of anyone else's) —
// but a waits for c too, which runs in c and waits behind nothing. That
// call closes no cycle, so the ask that waits behind a — d's — is walked
// again, and fails: d's turn goes on, c's call reaches d, and a's turn
// ends. (The walk was taken again from one call a had left, c's: every
// call waited for its deadline.)
func TestAFanOutStuckOnACallRunningInItsTargetFailsFast(t *testing.T) {
	a, b, c, d := grain.NewID("fan", "a"), grain.NewID("gate", "b"), grain.NewID("relay", "c"), grain.NewID("hold", "d")
	bIn, cIn, dIn := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	bGate, dGate := make(chan struct{}), make(chan struct{})
	outcomes := make(chan map[grain.ID]error, 1) // of a's calls
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "fan", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "a-ok", nil
				}
				type outcome struct {
					to  grain.ID
					err error
				}
				errs := make(chan outcome, 3)
				ask := func(to grain.ID) {
					go func() { _, err := silo.Call[string](ctx, s, to, "ping"); errs <- outcome{to, err} }()
				}
				ask(c)
				<-cIn // c's turn runs a's call: a's first call out
				ask(b)
				<-bIn // b's turn holds it
				ask(d)
				got := make(map[grain.ID]error)
				for range 3 {
					o := <-errs
					got[o.to] = o.err
				}
				outcomes <- got
				return nil, errors.Join(got[b], got[c], got[d])
			}
		}))
		require.NoError(t, silo.Register(s, "gate", gatedKind(bIn, bGate, "b-ok")))
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				cIn <- struct{}{}
				return silo.Call[string](ctx, s, d, "ping")
			}
		}))
		require.NoError(t, silo.Register(s, "hold", callsBackKind(s, dIn, dGate, a, "hi")))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromD := askAsync(ctx, s, d, "go")
	<-dIn
	fromA := askAsync(ctx, s, a, "go")
	waitBacklog(t, s, 2) // c's call and a's wait behind d's turn
	close(dGate)         // d calls a, behind a's turn: b may answer a yet
	waitBacklog(t, s, 3)
	close(bGate) // b answers: a's turn is down to c and d, both stuck
	requireCycle(t, <-fromD, d, a, c, d)
	requireCycle(t, <-fromA, a, d, a)
	got := <-outcomes
	require.NoError(t, got[b])
	require.NoError(t, got[c], "a's call to c answered once d's turn went on")
	requireCycle(t, got[d], a, d, a)
	assert.Equal(t, uint64(2), s.Stats().DeadLetters[grain.ReasonDeadlock])
}

// A turn that takes its first reply and cancels the calls it no longer
// waits for (as the guide says to) is not taken for stuck on them: b's
// turn, on another chain, calls a back while a's turn goes on after c's
// reply, and is answered once a's turn ends — its cancelled call to b, a
// dead letter (expired), is not run.
func TestAFanOutThatCancelsTheCallsItNoLongerWaitsForIsNoCycle(t *testing.T) {
	a, b, c := grain.NewID("first", "a"), grain.NewID("hold", "b"), grain.NewID("quick", "c")
	aIn, bIn, cIn := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	aGate, bGate, cGate := make(chan struct{}), make(chan struct{}), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "first", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "a-ok", nil
				}
				calls, cancel := context.WithCancel(ctx)
				defer cancel()
				errs := make(chan error, 2)
				for _, to := range []grain.ID{b, c} {
					go func() { _, err := silo.Call[string](calls, s, to, "ping"); errs <- err }()
				}
				if err := <-errs; err != nil {
					return nil, err
				}
				cancel()
				if err := <-errs; !errors.Is(err, context.Canceled) {
					return nil, fmt.Errorf("the call left: %w", err)
				}
				aIn <- struct{}{}
				<-aGate // the turn goes on with its reply
				return "done", nil
			}
		}))
		require.NoError(t, silo.Register(s, "hold", callsBackKind(s, bIn, bGate, a, "hi")))
		require.NoError(t, silo.Register(s, "quick", gatedKind(cIn, cGate, "c-ok")))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromB := askAsync(ctx, s, b, "call a")
	<-bIn
	fromA := askAsync(ctx, s, a, "go")
	<-cIn
	waitBacklog(t, s, 1) // a's call to b waits behind b's turn
	close(cGate)         // c answers first
	<-aIn
	close(bGate)         // b calls a, behind a's turn
	waitBacklog(t, s, 2) // and a's cancelled call waits behind b's
	close(aGate)
	require.NoError(t, <-fromA)
	require.NoError(t, <-fromB, "b's call to a answered once a's turn ended")
	_, err := s.Ask(ctx, b, "ping") // b has taken what waited in its mailbox
	require.NoError(t, err)
	d := s.Stats().DeadLetters
	assert.Zero(t, d[grain.ReasonDeadlock])
	assert.Equal(t, uint64(1), d[grain.ReasonExpired], "a's cancelled call, dropped")
}

// A call back on a chain that allowed re-entry, made after the turn that
// allowed it has ended, waits in line like any other ask: r's OnActivate
// (which keeps its first caller's chain, and runs on after that caller
// gave up) calls p back, on a chain where p allowed re-entry, while p's
// next turn waits on q; q's turn then calls r, which is still activating.
// The cycle q → r → p → q fails at once with ErrCallCycle, where the walk
// had taken r's call for one p lets in and given no verdict: every call
// waited for its deadline. (Found by the chaos program, its OnActivate
// hooks making calls.)
func TestACallBackOnAChainWhoseTurnEndedWaitsInLine(t *testing.T) {
	p, q, r := grain.NewID("p", "p"), grain.NewID("q", "q"), grain.NewID("r", "r")
	rIn, rGate, qIn, qGate := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1), make(chan struct{})
	fromHook := make(chan error, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "p", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch msg {
				case "first": // calls r, re-entry allowed, and gives up once r activates
					calls, cancel := context.WithCancel(silo.AllowCallChainReentrancy(ctx))
					go func() { <-rIn; cancel() }()
					_, err := silo.Call[string](calls, s, r, "hi")
					return nil, err
				case "go":
					return silo.Call[string](ctx, s, q, "go")
				}
				return "pong", nil
			}
		}))
		require.NoError(t, silo.Register(s, "q", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				qIn <- struct{}{}
				<-qGate
				return silo.Call[string](ctx, s, r, "hi")
			}
		}))
		require.NoError(t, silo.Register(s, "r", func(grain.ID) *activatingCaller {
			return &activatingCaller{s: s, to: p, in: rIn, gate: rGate, out: fromHook}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	_, err := s.Ask(ctx, p, "first")
	require.ErrorIs(t, err, context.Canceled, "p gave up on r's activation")
	fromP := askAsync(ctx, s, p, "go")
	<-qIn                // p's turn waits on q's
	close(rGate)         // r's OnActivate calls p, behind p's turn
	waitBacklog(t, s, 1) // (the first message r was sent is its activation's, not in line)
	close(qGate)         // q calls r, still activating: the cycle closes
	requireCycle(t, <-fromP, q, r, p, q)
	require.NoError(t, <-fromHook, "r's call to p answered once p's turn had ended")
}

// activatingCaller is a grain whose OnActivate tells in, waits for gate,
// calls to and reports the outcome on out.
type activatingCaller struct {
	s    *silo.Silo
	to   grain.ID
	in   chan<- struct{}
	gate <-chan struct{}
	out  chan<- error
}

func (a *activatingCaller) Receive(context.Context, *grain.Context, any) (any, error) {
	return "r-ok", nil
}

func (a *activatingCaller) OnActivate(ctx context.Context, _ *grain.Context) error {
	a.in <- struct{}{}
	<-a.gate
	_, err := silo.Call[string](ctx, a.s, a.to, "ping")
	a.out <- err
	return nil
}

// A grain lets nothing in while it activates, not even what its
// WithMayInterleave predicate takes: m's OnActivate calls p, whose turn
// (another chain) calls m with a message m's predicate takes. The cycle
// fails at once with ErrCallCycle; p's turn ends and m's call is
// answered. (Such a kind's OnActivate was taken for any of its turns,
// which let the message in: both calls waited for their deadlines. Found
// by the chaos program, its OnActivate hooks making calls.)
func TestACycleThroughTheOnActivateOfAMayInterleaveKindFailsFast(t *testing.T) {
	p, m := grain.NewID("p", "p"), grain.NewID("m", "m")
	pIn, pGate, mIn, mGate := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1), make(chan struct{})
	fromHook := make(chan error, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "p", callsBackKind(s, pIn, pGate, m, "read")))
		require.NoError(t, silo.Register(s, "m", func(grain.ID) *activatingCaller {
			return &activatingCaller{s: s, to: p, in: mIn, gate: mGate, out: fromHook}
		}, silo.WithMayInterleave(func(any) bool { return true })))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromP := askAsync(ctx, s, p, "go")
	<-pIn
	fromM := askAsync(ctx, s, m, "hi")
	<-mIn
	close(mGate) // m's OnActivate calls p, behind p's turn
	waitBacklog(t, s, 1)
	close(pGate) // p calls m, still activating: the cycle closes
	requireCycle(t, <-fromP, p, m, p)
	require.NoError(t, <-fromHook, "m's call to p answered once p's turn had ended")
	require.NoError(t, <-fromM)
}
