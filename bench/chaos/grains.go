package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// allKinds are the kinds a run may register, one of each way a grain may
// let messages in while a turn waits. chain is plain, but calls with
// silo.AllowCallChainReentrancy; mayin lets in hops with an odd seed;
// swre is a stateless worker that is reentrant too — the guide's kind for
// work that waits; blk is plain, reblk reentrant and swblk a stateless
// worker, each WithBlockingTurns (every turn starts off its partition). A
// run registers defaultKinds unless -kinds says.
const (
	defaultKinds = "plain,reent,mayin,sw,chain"
	allKinds     = defaultKinds + ",swre,blk,reblk,swblk"
)

// hop is the one message of the run: a turn that receives it makes Depth
// more hops down a chain of calls, decided by Seed.
type hop struct {
	ID    uint64
	Depth int
	Seed  uint64
}

// tick is a timer's message: each tick calls one grain.
type tick struct{}

// mayInterleave is the mayin kind's predicate.
func mayInterleave(msg any) bool {
	h, ok := msg.(hop)
	return ok && h.Seed%2 == 1
}

// chaosGrain is every kind's grain: what it does with a hop is decided by
// the hop's seed, and what its hooks and ticks do by its own rng.
type chaosGrain struct {
	r   *run
	id  grain.ID
	rng *rand.Rand // for hooks and ticks; a grain's code runs on one goroutine at a time
}

func (r *run) newGrain(id grain.ID) *chaosGrain {
	return &chaosGrain{r: r, id: id, rng: rand.New(rand.NewPCG(r.cfg.seed, id.Hash()))}
}

func (g *chaosGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case hop:
		g.r.led.turn(m.ID, g.id.String())
		defer g.r.led.turnEnded(m.ID)
		rng := rand.New(rand.NewPCG(m.Seed, m.ID))
		if p := g.r.cfg.panicEvery; p > 0 && rng.IntN(p) == 0 {
			panic("chaos: a planned panic")
		}
		if d := g.r.cfg.deactEvery; d > 0 && rng.IntN(d) == 0 {
			c.DeactivateOnIdle()
		}
		g.r.control(ctx, rng)
		next := func() {
			if m.Depth > 0 {
				g.r.out(ctx, c.Silo(), g.id, m.ID, rng, m.Depth-1, "")
			}
		}
		if e := g.r.cfg.awaitEvery; e > 0 && rng.IntN(e) == 0 {
			g.r.await(ctx, rng, next)
		} else {
			next()
		}
		return m.ID, nil
	case tick:
		t := g.r.led.hookTurn("tick:" + g.id.String())
		defer g.r.led.turnEnded(t)
		g.r.out(ctx, c.Silo(), g.id, t, g.rng, 0, "tick:")
		return nil, nil
	}
	return nil, errors.New("chaos: unknown message")
}

// errPlannedActivation is what OnActivate returns with -actfail.
var errPlannedActivation = errors.New("chaos: a planned activation failure")

func (g *chaosGrain) OnActivate(ctx context.Context, c *grain.Context) error {
	cfg := &g.r.cfg
	if cfg.hookWait > 0 {
		time.Sleep(cfg.hookWait) // a load at a store: a blocking call
	}
	if cfg.actFailEvery > 0 && g.rng.IntN(cfg.actFailEvery) == 0 {
		return errPlannedActivation // storage down, say: the messages waiting fail with it
	}
	if cfg.actHangEvery > 0 && g.rng.IntN(cfg.actHangEvery) == 0 {
		// Refused with ErrActivation once given up on, ErrSiloClosed as
		// the silo closes.
		g.hangPast(ctx, c, cfg.actTimeout, "OnActivate", func(err error) bool { return err != nil })
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	if cfg.tickEvery > 0 && g.rng.IntN(cfg.tickEvery) == 0 {
		if err := c.StartTimer("tick", cfg.tickPeriod, cfg.tickPeriod, tick{}); err != nil {
			return err
		}
	}
	if cfg.actCallEvery > 0 && g.rng.IntN(cfg.actCallEvery) == 0 {
		t := g.r.led.hookTurn("activate:" + g.id.String())
		defer g.r.led.turnEnded(t)
		g.r.out(ctx, c.Silo(), g.id, t, g.rng, 0, "activate:")
	}
	return nil
}

// hangPast is a hook's storage hanging past the hook's bound (-acthang:
// a load past Config.ActivationTimeout; -deacthang: a save past
// DeactivationTimeout): half the time it ends with its ctx, which the
// silo ends at the bound; half it ignores its ctx for three times the
// bound and then, its ctx ended, starts a timer — which would never fire,
// and must be refused as refused says. The grain's messages meanwhile are
// dead letters, failed asks or a fresh activation's: never lost.
func (g *chaosGrain) hangPast(ctx context.Context, c *grain.Context, bound time.Duration, hook string, refused func(error) bool) {
	g.r.led.hookHung()
	if g.rng.IntN(2) == 0 {
		<-ctx.Done()
		return
	}
	time.Sleep(3 * bound) // storage that ignores its ctx
	if ctx.Err() == nil {
		return // not given up on yet: it came back in time after all
	}
	if err := c.StartTimer("late", time.Millisecond, 0, tick{}); !refused(err) {
		g.r.led.brokenHook(fmt.Sprintf("%v: a timer started by an %s run past its bound (%v) was not refused as it should be: %v", g.id, hook, context.Cause(ctx), err))
	}
}

func (g *chaosGrain) OnDeactivate(ctx context.Context, c *grain.Context) error {
	if g.r.cfg.hookWait > 0 {
		time.Sleep(g.r.cfg.hookWait) // a save at a store: a blocking call
	}
	if e := g.r.cfg.deactHangEvery; e > 0 && g.rng.IntN(e) == 0 {
		g.hangPast(ctx, c, g.r.cfg.hookTimeout, "OnDeactivate", func(err error) bool { return errors.Is(err, grain.ErrDeactivating) })
		return ctx.Err()
	}
	if e := g.r.cfg.hookCallEvery; e > 0 && g.rng.IntN(e) == 0 {
		t := g.r.led.hookTurn("deactivate:" + g.id.String())
		defer g.r.led.turnEnded(t)
		g.r.out(ctx, c.Silo(), g.id, t, g.rng, 0, "deactivate:")
	}
	return nil
}

// out makes the calls or tells of one turn: one, or — with -fan, one time
// in two — several at once, each on a goroutine of its own, waiting for them
// all or, one time in three, for the first reply only (and cancelling the
// rest, as docs/guide.md says a turn that takes its first reply should).
// Each call's hop goes depth further; parent is the hop of the turn that
// makes them (or the ID of the hook's or tick's turn). where names a hook's or a tick's
// calls in the outcomes.
func (r *run) out(ctx context.Context, rt grain.Runtime, from grain.ID, parent uint64, rng *rand.Rand, depth int, where string) {
	n := 1
	if r.cfg.fan > 1 && rng.IntN(2) == 0 {
		n = 2 + rng.IntN(r.cfg.fan-1)
	}
	if from.Kind() == "chain" {
		ctx = silo.AllowCallChainReentrancy(ctx)
	}
	type call struct {
		to   grain.ID
		h    hop
		tell bool
	}
	calls := make([]call, n)
	for i := range calls {
		to, tell := r.target(rng)
		calls[i] = call{to: to, tell: tell, h: hop{ID: r.led.send(tell, to, parent, fmt.Sprintf("%s%s (%d) -> %s", where, from, parent, to)), Depth: depth, Seed: rng.Uint64()}}
	}
	if n == 1 {
		c := calls[0]
		r.send(ctx, rt, from.String(), parent, c.to, c.h, c.tell, where)
		return
	}
	first := rng.IntN(3) == 0
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			r.send(cctx, rt, from.String(), parent, c.to, c.h, c.tell, where)
			done <- struct{}{}
		})
	}
	if first {
		<-done
		cancel()
	}
	wg.Wait()
}

// control stops a random grain (-stop) or deactivates one from outside it
// (-deactout), each one time in so many, and records how the call ended;
// both return at once, whoever calls them, a turn of the grain they name
// included. With neither set it draws nothing from rng, so a seed's run
// is the one it was before the flags.
func (r *run) control(ctx context.Context, rng *rand.Rand) {
	if e := r.cfg.stopEvery; e > 0 && rng.IntN(e) == 0 {
		r.led.controlled("stop", r.s.Stop(ctx, r.pick(rng)))
	}
	if e := r.cfg.deactOutEvery; e > 0 && rng.IntN(e) == 0 {
		r.led.controlled("deactivate", r.s.Deactivate(ctx, r.pick(rng)))
	}
}

// await makes the turn wait in silo.Await (-await): half the time on a
// short timer, as on I/O, and then makes its hop's calls; half the time
// with the calls inside the wait, as a helper that does I/O and calls
// grains would. Either way the grain lets in what its kind interleaves
// meanwhile, and the ledger still wants every hop handled once.
func (r *run) await(ctx context.Context, rng *rand.Rand, next func()) {
	if rng.IntN(2) == 0 {
		err := silo.Await(ctx, func() error {
			t := time.NewTimer(time.Duration(1+rng.IntN(200)) * time.Microsecond)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err == nil {
			next()
		}
		return
	}
	_ = silo.Await(ctx, func() error { next(); return nil })
}

// target chooses what a hop goes to and whether it is a tell: with
// -observers, an observer one time in -obsevery (a tell: an observer takes
// no asks), else a grain of any kind.
func (r *run) target(rng *rand.Rand) (grain.ID, bool) {
	if len(r.obs) > 0 && rng.IntN(r.cfg.obsEvery) == 0 {
		return r.obs[rng.IntN(len(r.obs))].ID(), true
	}
	return r.pick(rng), rng.IntN(r.cfg.tellEvery) == 0
}

// pick chooses a grain of any kind.
func (r *run) pick(rng *rand.Rand) grain.ID {
	return grain.NewIntID(r.kinds[rng.IntN(len(r.kinds))], rng.Int64N(int64(r.cfg.keys)))
}

// send sends one hop and records how it ended.
func (r *run) send(ctx context.Context, rt grain.Runtime, from string, parent uint64, to grain.ID, h hop, tell bool, where string) {
	r.led.sending(h.ID, to.Kind() == "mayin" && mayInterleave(h))
	defer r.led.sentOff(h.ID)
	if tell {
		err := rt.Tell(ctx, to, h)
		if err != nil && !errors.Is(err, silo.ErrOverloaded) && !errors.Is(err, grain.ErrObserverClosed) {
			r.led.deadLetter(h.ID, "refused") // refused, nothing sent; an overloaded grain's, or a closed observer's, is a dead letter of its own
		}
		return
	}
	r.led.asking(h.ID, flight{from: from, to: to.String(), parent: parent, where: where, since: time.Now(), mayIn: to.Kind() == "mayin" && mayInterleave(h)})
	reply, err := rt.Ask(ctx, to, h)
	if err == nil && reply != h.ID {
		err = errors.New("chaos: a reply to another hop")
	}
	out := askOutcome(ctx, err, where)
	if out == outcomeTimeout {
		r.dumpOnce(fmt.Sprintf("hop %d timed out", h.ID)) // before its end takes it off the asks under way
	}
	r.led.ended(h.ID, where+out)
}

// askOutcome names how an ask made with ctx from where ended: as outcome
// does, but for a hook's call cut off when the hook's own time ran out
// (an OnDeactivate's at Config.DeactivationTimeout, -hooktimeout; an
// OnActivate's as the silo gave up on it, -acthang) — the silo kept its
// word to the hook, and the call was not left to hang.
func askOutcome(ctx context.Context, err error, where string) string {
	out := outcome(err)
	hook := where == "deactivate:" || where == "activate:"
	if out == outcomeTimeout && hook && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outcomeHookBound
	}
	return out
}

// outcome names how an ask ended.
func outcome(err error) string {
	var dl *grain.DeadLetterError
	var pe *grain.PanicError
	var te *grain.TimeoutError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &te):
		return outcomeTimeout
	case errors.Is(err, grain.ErrActivation):
		// Before the ctx's errors: an activation given up on past
		// Config.ActivationTimeout (-acthang) fails its asks with a cause
		// that matches context.DeadlineExceeded, the caller's ctx live.
		return "activation-failed"
	case errors.Is(err, context.DeadlineExceeded):
		return outcomeTimeout
	case errors.Is(err, silo.ErrCallCycle):
		return "cycle"
	case errors.Is(err, silo.ErrCallTooDeep):
		return "too-deep"
	case errors.As(err, &pe):
		return "panic"
	case errors.As(err, &dl):
		return "dead-letter:" + dl.Reason.String()
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, silo.ErrSiloClosed):
		return "closed"
	}
	return "other:" + err.Error()
}

const outcomeTimeout = "timeout"

// outcomeHookBound is an OnDeactivate's call cut off when the hook's own
// time ran out (-hooktimeout): counted, but no ask left to its deadline.
const outcomeHookBound = "hook-bound"
