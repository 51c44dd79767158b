package silo

import (
	"log/slog"
	"sync/atomic"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// A handler may end its goroutine with runtime.Goexit — t.FailNow does,
// and so require.* in a test — instead of returning or panicking. No
// recover sees it: the goroutine unwinds and is gone. Left alone, the turn
// would never end: its caller would wait for its deadline, the grain would
// stay busy for good, and a graceful shutdown would wait for it. So the
// goroutines that run turns (partition.run, and interleaved turns) defer a
// check that they returned, and end a turn cut short this way as a failed
// one: a *grain.PanicError wrapping ErrGoexit, as if it had panicked.

// goexited ends the turn w was running when its goroutine exited, and gives
// the partition to a new owner if w still owned it.
func (p *partition) goexited(w *worker) {
	if w.word.Load()&stateMask == wIdle {
		// Not in a turn: an owner-side callback exited (none runs there
		// now: a Decider runs in its turn, a Logger's handler on the log
		// writer's goroutine, logwriter.go). Keep the partition served.
		p.s.log(slog.LevelError, "granary: a callback ended its partition's goroutine with runtime.Goexit; a new one takes over")
		p.s.owners.Add(1) // this goroutine is still counted: never at zero
		go p.run(newWorker(p, false), nil)
		p.s.owners.Done()
		return
	}
	w.detach() // a new owner takes the partition, if w still had it; w ends as a turn
	a := w.a
	if w.res.kind == tkMessage { // its activation is in its ctx (a message turn keeps the hot path free of the store)
		a = turnCtxOf(w, w.res.req).info.a
	}
	c := ctl{op: opTurnDone, a: a, res: w.res}
	p.goexitedOutcome(w, a, &c.res, func() { p.handOnGoexited(w, &c) })
	p.handOnGoexited(w, &c)
}

// goexitedOutcome settles res, the outcome of the turn w ran, whose
// goroutine is ending in runtime.Goexit. In the turn's Decider
// (partition.decideInTurn, w.deciding), the turn's outcome stands, with
// the default directive; in the turn itself, the turn fails with ErrGoexit
// and its Decider is asked. Either way the turn then gives up its token
// and its ctx, which the Decider had. handOn passes the outcome to the
// owner if a Decider's own Goexit ends the goroutine before this returns.
func (p *partition) goexitedOutcome(w *worker, a *act, res *turnResult, handOn func()) {
	if w.deciding {
		w.deciding = false
		p.decidedByDefault(a, res)
		p.releaseGoexited(w, a, res)
		return
	}
	p.failGoexited(w, a, res)
	p.decideGoexited(w, a, res, func() {
		p.releaseGoexited(w, a, res)
		handOn()
	})
	p.releaseGoexited(w, a, res)
}

// decideGoexited asks the kind's Decider about res, the outcome of a turn
// cut short by runtime.Goexit, on the turn's goroutine as for any failed
// turn (partition.decideInTurn), with the turn's ctx: the partition has
// another owner by then, so one that blocks holds up no other grain. One
// that calls runtime.Goexit as well ends the goroutine before its caller
// goes on: then the default directive applies, and handOn passes the
// outcome to the owner.
func (p *partition) decideGoexited(w *worker, a *act, res *turnResult, handOn func()) {
	if res.err == nil || res.decided || (res.kind != tkMessage && !res.ranMsg) {
		return
	}
	returned := false
	defer func() {
		if !returned {
			p.decidedByDefault(a, res)
			handOn()
		}
	}()
	res.directive = p.askDecider(turnCtxOf(w, res.req).handlerCtx(), a, res.err)
	res.decided = true
	returned = true
}

// handOnGoexited sends the outcome c of a turn cut short by runtime.Goexit
// to the partition's owner, and counts the turn out.
func (p *partition) handOnGoexited(w *worker, c *ctl) {
	if c.res.kind == tkActivate && !c.res.ranMsg {
		// An activation's first message, which did not run — unless a
		// give-up or a Close takes it first: the race is settled as when
		// the hook returns (turn.go, execute). One the owner gave up on
		// is counted out of the turns a Shutdown waits for as it ends
		// (res.gaveUp, partition.abandoned).
		first := w.env.Msg != nil
		if first {
			p.firstsOut.Add(1)
		}
		switch {
		case atomic.CompareAndSwapInt32(&w.actRace, actHooking, actReturned):
			if first {
				c.first, c.res.firstOut = w.env, true
			}
		default:
			if first {
				p.firstsOut.Add(-1)
			}
			c.res.gaveUp = atomic.LoadInt32(&w.actRace) == actGivenUp
		}
	}
	p.q.PushControl(*c)
	p.s.turnEnded()
}

// decidedByDefault gives res, the outcome of a turn whose Decider called
// runtime.Goexit, the default directive.
func (p *partition) decidedByDefault(a *act, res *turnResult) {
	p.logDeciderGoexit(a, res.err)
	res.directive, res.decided = activation.DefaultDecider(a.ID, res.err), true
}

// failGoexited turns res into the outcome of a turn cut short by
// runtime.Goexit. One that exited in OnActivate ran under the hook's own
// ctx (turn.go: hookCtx): that ctx ends here, and a token the hook took
// back goes to the turn's ctx, which releaseGoexited gives up.
func (p *partition) failGoexited(w *worker, a *act, res *turnResult) {
	res.reply = nil
	res.err = grain.Recovered(a.ID, ErrGoexit)
	if hc := w.hook.Load(); hc != nil && res.kind == tkActivate {
		handOnToken(a, hc, turnCtxOf(w, res.req))
		hc.release()
	}
}

// releaseGoexited gives back the grain's turn token, if the turn cut short
// by runtime.Goexit held it, and ends the turn's ctx. A second call finds
// nothing left to do.
func (p *partition) releaseGoexited(w *worker, a *act, res *turnResult) {
	tc := turnCtxOf(w, res.req)
	if x := a.x.Load(); x != nil {
		x.callMu.Lock()
		if tc.info.req != nil || tc == w.itc {
			tc.info.markOver(x) // as endTurnToken
		}
		held := tc.info.holdsToken
		tc.info.holdsToken = false
		x.callMu.Unlock()
		if held {
			x.token.unlock()
		}
	}
	tc.release()
	w.endContext()
}

// turnCtxOf returns the ctx of a message or activation turn w runs for req:
// the ask's own, or one of w's. partition.turnCtxFor resets it as the turn
// begins.
func turnCtxOf(w *worker, req *queues.Request) *turnCtx {
	if req != nil {
		if tc, ok := req.Local.(*turnCtx); ok {
			return tc
		}
	}
	if w.ilv {
		if w.itc == nil {
			w.itc = newInterleavingCtx(w.p)
		}
		return w.itc
	}
	return &w.tc
}
