package silo

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Turns: running one turn of a grain on the owner's goroutine, and
// handing its outcome back to whoever owns the partition when it ends.

type turnKind uint8

const (
	tkMessage turnKind = iota
	tkActivate
	tkDeactivate
)

type turnResult struct {
	kind   turnKind
	err    error        // the activation's error, or the message's
	tick   *queues.Tick // the turn ran a timer's tick
	ranMsg bool         // an activation turn went on to run its first message
	gaveUp bool         // an activation turn the owner gave up on (acttimeout.go)
	// firstOut: a failed activation turn hands its first message back
	// (counted in partition.firstsOut until finish has it)
	firstOut bool
	// an activation turn's first message, whose caller gave up meanwhile,
	// dropped as expired instead of run
	firstDropped bool
	// the Decider's directive for a failed turn, asked on the turn's
	// goroutine before finish applies anything (partition.decideInTurn,
	// decideGoexited)
	decided   bool
	directive activation.Directive
	req       *queues.Request
	reply     any // for req: sent by finish
	// holds: the turn holds its grain's other messages (holding.go);
	// finish ends the hold
	holds bool
}

// runTurn runs one turn of a on w's goroutine. If the partition was handed
// off while the turn ran, the finish goes to the new owner as a control
// message and runTurn returns false: w must stop touching the partition.
//
// env may lie in a partition queue's segment, read in place: once the turn
// is handed off, a new owner goes on draining the queue and recycles the
// segment. So everything the turn needs from env is read before the turn
// begins (the hot path), or env is copied first (the rarer turns).
// The outcome is written to w.res, not returned: a result copied out of a
// call costs a store-forwarding stall per turn.
func (p *partition) runTurn(w *worker, a *act, k turnKind, env *queues.Envelope) bool {
	if k == tkMessage && env.Request != nil && p.dropExpired(env) { // a tell pays one nil check
		return true
	}
	a.Turns++
	p.inflight++
	if a.isWorker() {
		p.swBusy.Add(1)
		w.sw = a // counted in its identity's bucket if the turn leaves the partition (detachAt)
	}
	w.label(a.k)
	w.req, w.kind = env.Request, k
	if k != tkMessage {
		return p.runOtherTurn(w, a, k, *env)
	}
	res := &w.res
	tc := p.turnCtxFor(w, a, env.Request, false)
	*res = turnResult{kind: tkMessage, tick: p.setContext(w, a, env.Meta), req: env.Request}
	if a.k.oneHolds { // no turn of a's is under way: this one holds it
		a.beginHolding()
		res.holds = true
		w.holding.Store(true)
	}
	msg := env.Msg
	hctx := tc.handlerCtx()
	w.begin() // env is not touched from here on
	// A kind WithBlockingTurns leaves the partition as the turn begins
	// (blocking.go).
	off := a.k.blocking && p.startOff(w)
	res.reply, res.err = w.run(hctx, a, msg)
	if off {
		p.endOff()
	}
	if len(a.k.filters) > 0 {
		w.endFiltered()
	}
	if res.err != nil {
		p.decideInTurn(w, a, res, hctx) // still in the turn, for the watchdog, with its token and ctx
	}
	endTurnToken(w, a, tc)
	tc.release()
	w.endContext()
	return p.endTurn(w, a, res, nil)
}

// runOtherTurn is runTurn for an activation or deactivation turn, on its own
// copy of the envelope.
func (p *partition) runOtherTurn(w *worker, a *act, k turnKind, env queues.Envelope) bool {
	res := &w.res
	w.a, w.env = a, env // for a turn that ends in runtime.Goexit (see goexit.go), and a give-up
	w.actRace = actHooking
	w.hook.Store(nil)
	if k == tkActivate && a.k.oneHolds {
		a.beginHolding()
		w.holdsNext = true
	}
	w.begin()
	p.execute(w, a, k, &env, false, res)
	var first *queues.Envelope // an activation turn's message, if it did not run
	if k == tkActivate && !res.ranMsg && env.Msg != nil && !res.gaveUp && !res.firstDropped {
		first = &env
	}
	return p.endTurn(w, a, res, first)
}

// endTurn ends the turn w ran: the owner applies its outcome, or, if the
// partition was handed off meanwhile, sends it to the new owner.
func (p *partition) endTurn(w *worker, a *act, res *turnResult, first *queues.Envelope) bool {
	if !w.end() {
		if t := w.slow.Load(); t != 0 {
			p.reportSlow(a, time.Since(time.Unix(0, t)), w.slowCPU.Load())
		}
		c := ctl{op: opTurnDone, a: a, res: *res} // w.req now belongs to the new owner's records
		if first != nil {
			c.first = *first
		}
		p.q.PushControl(c)
		return false
	}
	w.req, w.sw = nil, nil
	if res.kind == tkMessage && res.err == nil && res.req == nil && res.tick == nil && first == nil && p.finishPlain(a) {
		return true // most turns: a plain tell's, ended the short way
	}
	p.finish(a, res, first)
	return true
}

// reportSlow records a turn that held its partition until the watchdog
// handed the partition off, and went on for since after that: it took at
// least since+HandoffThreshold. The silo times turns this way, at the
// watchdog's granularity, so the hot path reads no clock. cpu is the
// process's CPU time at the handoff (-1 if unknown).
// slowWaitHint ends the line of a slow turn the process's cores were all
// but idle through (docs/guide.md, "Handlers that block").
const slowWaitHint = "a turn that waits (I/O, a lock) holds its partition: register the kind WithBlockingTurns, or wait in silo.Await"

func (p *partition) reportSlow(a *act, since time.Duration, cpu int64) {
	args := []any{"grain", a.ID.String(), "at_least", since + p.s.cfg.HandoffThreshold}
	if p.s.dog.crowded.Load() {
		// With goroutines waiting for every core, the turn's own may have
		// waited among them rather than run (the example game's referee,
		// a hash, reported at 15 ms under a thousand HTTP clients): the
		// partition was held all the same, and the line says why it may
		// have been.
		args = append(args, "scheduler_crowded", true)
	}
	if busy, ok := p.s.coresBusy(since, cpu); ok {
		args = append(args, "cores_busy", busy)
		if busy < 0.5/float64(runtime.GOMAXPROCS(0)) && !a.k.blocking {
			// Under half a core's share: the turn most likely waited (or
			// its thread was kept off its core: the guide's table). Say
			// what to do about a wait; the line is where one learns of it.
			args = append(args, "hint", slowWaitHint)
		}
	}
	p.s.log(slog.LevelWarn, "granary: slow turn held its partition", args...)
	p.s.slowTurns.Add(1)
}

// execute runs user code: a message, OnActivate or OnDeactivate. It touches
// no partition state, since it may run after the partition was handed off.
// An interleaved turn holds the grain's turn token throughout: its caller
// waited for the claim reserved when the turn was dispatched.
func (p *partition) execute(w *worker, a *act, k turnKind, env *queues.Envelope, interleaved bool, res *turnResult) {
	*res = turnResult{kind: k, req: env.Request, holds: w.holdsNext}
	w.holdsNext = false
	var tc *turnCtx
	if k == tkDeactivate { // its own ctx, bounded by the deactivation timeout
		// The owner made its parent (beginDeactivate, on this goroutine),
		// and ends it when the turn is over or given up on.
		d := a.x.Load().deact
		ctx := d.ctx
		if !p.s.realClk { // its deadline, in real time, is the turn's to set
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, p.s.cfg.DeactivationTimeout)
			defer cancel()
		}
		tc = &turnCtx{home: p}
		tc.reset(ctx, a, nil, w, interleaved)
		tc.info.deact = d
	} else {
		tc = p.turnCtxFor(w, a, env.Request, interleaved)
	}
	if a.k.oneHolds { // the owner marked the hold, if it is one, as it let the turn in
		w.holding.Store(res.holds)
	}
	res.tick = p.setContext(w, a, env.Meta)
	hctx := tc.handlerCtx()
	switch k {
	case tkMessage:
		if interleaved && res.tick != nil && a.x.Load().tickOver(res.tick) {
			// Its timer was stopped or replaced by a turn that held the
			// grain's turn token while this tick waited for it: not
			// delivered, as one still queued is not (staleTick).
			break
		}
		res.reply, res.err = w.run(hctx, a, env.Msg)
	case tkActivate:
		if a.k.blocking && p.startOff(w) { // WithBlockingTurns: the factory, OnActivate and the first message
			defer p.endOff()
		}
		// The activation is the grain's, not its first caller's: OnActivate
		// runs under a ctx of its own, which ends at the silo's Close and
		// at a give-up on the activation (timeOut), but not when the first
		// caller gives up — else one impatient caller failed the
		// activation, and every message queued behind it, for callers that
		// would have waited. It has the caller's values and call chain.
		// The first message then runs under the caller's ctx.
		g, err := activation.Build(a.ID, a.k.factory)
		if err == nil && a.k.hooksOf != nil {
			err = a.k.hooksOf(g)
		}
		if err == nil {
			a.g = g
			hc := tc
			if _, hooked := g.(grain.Activator); hooked {
				hc = p.hookCtx(w, a, res.req)
			}
			err = p.activateHook(w, a, hc, env.Msg)
			if hc != tc {
				handOnToken(a, hc, tc)
				hc.release() // the hook's ctx ends with the hook
				w.hook.Store(nil)
			}
		}
		if err != nil && env.Msg != nil {
			// Counted before the race is settled: a Close that loses it
			// (closeActivations) then waits for the message.
			p.firstsOut.Add(1)
			res.firstOut = true
		}
		if !atomic.CompareAndSwapInt32(&w.actRace, actHooking, actReturned) {
			// Given up on while it ran (acttimeout.go): the owner has
			// failed the activation and taken its first message.
			if res.firstOut {
				p.firstsOut.Add(-1)
				res.firstOut = false
			}
			res.err, res.gaveUp = errActivationOverran, true
			break
		}
		if res.firstOut && p.s.testFailedActivation != nil {
			p.s.testFailedActivation()
		}
		if err != nil {
			res.err = err // finish fails the first message with the rest
			break
		}
		if env.Msg != nil { // the first message, in the same turn
			if env.Request != nil && env.Request.Abandoned() {
				// Its caller gave up while the grain activated: it is
				// not run for nobody (as dropExpired).
				res.firstDropped = true
				p.s.deadLetter(*env, grain.ReasonExpired, nil)
				break
			}
			res.ranMsg = true
			res.reply, res.err = w.run(hctx, a, env.Msg)
		}
	case tkDeactivate:
		t0, off := p.hookBegin(w, &a.k.deactHooks)
		res.err = activation.Deactivate(tc, a.g, w.cur)
		p.hookEnd(&a.k.deactHooks, t0, off)
	}
	if len(a.k.filters) > 0 {
		w.endFiltered()
	}
	if res.err != nil {
		p.decideInTurn(w, a, res, hctx)
	}
	endTurnToken(w, a, tc)
	tc.release()
	w.endContext()
}

// hookCtx makes the ctx of a's OnActivate, whose first message is req's
// (nil for a tell). It is the hook's alone, never reused: a library the
// hook passes it to (database/sql loading the state) may watch it from a
// goroutine of its own that looks after the hook has returned, when the
// worker's own ctx is another turn's (TestALibraryWatchingAHooksCtxLate-
// DoesNotRaceTheNextTurn). w.hook holds it for a give-up (acttimeout.go)
// and a Goexit (goexit.go); a give-up that came before it was there ends it
// here (the two meet on seq-cst atomics: each stores, then loads the
// other's).
func (p *partition) hookCtx(w *worker, a *act, req *queues.Request) *turnCtx {
	hc := &turnCtx{home: p, hook: true}
	if req != nil {
		hc.reset(context.WithoutCancel(req.Ctx), a, req, w, false)
	} else {
		var parent context.Context
		if p.s.cfg.ActivationTimeout >= 0 {
			// A tell's ctx ends with the silo alone; this one may end at a
			// give-up too: give it a parent, so that Done makes a channel
			// that can.
			parent = p.base
		}
		hc.reset(parent, a, nil, w, false)
	}
	w.hook.Store(hc)
	if atomic.LoadInt32(&w.actRace) == actGivenUp {
		hc.timeOut()
	}
	return hc
}

// handOnToken moves the grain's turn token, if the hook's ctx from took it
// back after a call that let others in, to the ctx the turn goes on with,
// which gives it up when the turn ends (execute).
func handOnToken(a *act, from, to *turnCtx) {
	x := a.x.Load()
	if x == nil { // the token lives in the extra record: never taken
		return
	}
	x.callMu.Lock()
	from.info.markOver(x) // the hook's calls still out take nothing back for it (retakeToken)
	if from.info.holdsToken {
		from.info.holdsToken = false
		to.info.holdsToken = true
	}
	x.callMu.Unlock()
}

// activateHook runs a's OnActivate, marked as running for an interleaving
// kind (see actExtra.activating), under the values its first message, a
// tell's, carries (see hookValues).
func (p *partition) activateHook(w *worker, a *act, tc *turnCtx, first any) error {
	if atomic.LoadInt32(&w.actRace) == actGivenUp {
		// Given up on while the factory ran (or the silo closed): the
		// activation has failed and its messages are dead letters, so
		// the hook would load for nothing, beside the grain's next
		// activation perhaps. It does not run.
		return errActivationOverran
	}
	ctx, err := w.hookValues(tc, first)
	if err != nil {
		return err
	}
	if tc.hook { // an OnActivate to run (hookCtx): maybe off the partition
		t0, off := p.hookBegin(w, &a.k.actHooks)
		defer p.hookEnd(&a.k.actHooks, t0, off)
	}
	if !a.k.interleaves() {
		return activation.Activate(ctx, a.g, w.cur)
	}
	x := a.extra()
	x.activating.Store(true)
	defer x.activating.Store(false)
	return activation.Activate(ctx, a.g, w.cur)
}

// dropExpired drops an ask whose caller gave up before its turn began, as a
// dead letter with reason expired, and reports whether it did. As in
// Orleans (DropExpiredMessages), a grain that falls behind does not spend
// itself on replies nobody waits for, which would only put it further
// behind.
func (p *partition) dropExpired(env *queues.Envelope) bool {
	if env.Request == nil || !env.Request.Abandoned() {
		return false
	}
	p.s.deadLetter(*env, grain.ReasonExpired, nil)
	return true
}

// turnCtxFor returns the context of the turn: the ask's own, or the
// worker's, reset.
func (p *partition) turnCtxFor(w *worker, a *act, req *queues.Request, interleaved bool) *turnCtx {
	w.ilv = req == nil && a.k.interleaves() // see ownCtx
	if w.ilv && (w.itc == nil || w.itc.used()) {
		// A call of the turn before held its info: a goroutine of that turn
		// may still, and the info must not be reset under it (endTurnToken).
		w.itc = newInterleavingCtx(p)
	}
	tc := turnCtxOf(w, req)
	var parent context.Context
	if req != nil {
		parent = req.Ctx
	}
	tc.reset(parent, a, req, w, interleaved)
	return tc
}

// setContext points the worker's grain.Context at the turn, and returns
// the timer tick the message is, if it is one.
func (p *partition) setContext(w *worker, a *act, meta *queues.Meta) *queues.Tick {
	var sender *grain.ID
	var tick *queues.Tick
	if meta != nil {
		sender, tick = &meta.Sender, meta.Tick
	}
	if p.s.cfg.CheckContexts {
		w.checkedContext(a, sender)
	} else {
		w.gc.Set(&a.ID, sender, p.s.rt, a)
	}
	return tick
}
