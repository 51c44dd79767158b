package silo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Lifecycle: what the owner does when a turn has finished: supervision,
// restart, stop, deactivation, removal, and the backlog bookkeeping.

func (p *partition) beginDeactivate(w *worker, a *act) bool {
	why := a.deactReason()
	a.setDeactWant(false)
	_ = a.Transition(activation.Deactivating)
	p.stopTimers(a)
	restarting := p.restartHook(a) // the grain stays: no deactivation
	if x := a.x.Load(); x != nil && x.deact != nil && x.deact.restart {
		// The instance failed: whatever asked it to go since (a Stop), its
		// state is suspect, and its hook is told so.
		why = grain.DeactivationFailed
	}
	if !restarting {
		p.s.deacts[why].Add(1)
		p.wheel.Remove(&a.idle)
		if p.lru != nil {
			p.lru.Remove(a.ID)
		}
	}
	if a.g == nil {
		p.remove(a)
		return true
	}
	if _, hook := a.g.(grain.Deactivator); !hook {
		// No code of the grain's to run: no turn, no ctx, no timer. A
		// partition deactivating many grains at once (idle collection, a
		// shutdown) pays for none of them.
		p.nHandled++
		p.remove(a)
		return true
	}
	// OnDeactivate's ctx ends at DeactivationTimeout; a hook that ignores it
	// must not keep the grain's messages waiting for ever. The give-up runs
	// on the silo's clock and ends the ctx too, so that on a test's manual
	// clock a hook waiting on its ctx returns when the test moves the clock
	// past the timeout, not after that long in real time.
	x := a.extra()
	x.mu.Lock()
	x.refuse = refuseDeactivating // before the hook's turn begins: its StartTimer sees it
	x.mu.Unlock()
	x.deactReason = why
	d := &deactHook{}
	if restarting {
		d = x.deact
	}
	if p.s.realClk {
		// The ctx's own deadline comes first, by HandoffThreshold: the
		// give-up only removes the grain. One ctx, one runtime timer —
		// a shutdown runs a million of these.
		d.ctx, d.stop = context.WithTimeoutCause(p.base, p.s.cfg.DeactivationTimeout, errDeactivationOverran)
	} else {
		// The hook's turn bounds this in real time (execute); the give-up
		// ends it on the silo's clock.
		d.ctx, d.end = context.WithCancelCause(p.base)
	}
	d.timer = p.s.after(p.s.cfg.DeactivationTimeout+p.s.cfg.HandoffThreshold, func() {
		p.q.PushControl(ctl{op: opDeactTimeout, a: a})
	})
	x.deact = d
	return p.runTurn(w, a, tkDeactivate, &queues.Envelope{})
}

// errDeactivationOverran is the cause of the ctx of an OnDeactivate the
// silo gave up on: a deadline, matching context.DeadlineExceeded.
var errDeactivationOverran = fmt.Errorf("granary: OnDeactivate overran Config.DeactivationTimeout: %w", context.DeadlineExceeded)

// endDeactCtx ends the ctx of a's OnDeactivate, if it has one, with cause.
// The ctx itself is left as it is: the hook's turn reads it as it begins,
// and once its partition has been handed off that turn runs on a goroutine
// of its own — an owner that gives up on it (deactivationOverran, on a
// test's manual clock moved an hour on) may come first. Clearing it raced
// with that read, and could have made the turn derive its ctx from nil.
func (p *partition) endDeactCtx(a *act, cause error) {
	x := a.x.Load()
	if x == nil || x.deact == nil {
		return
	}
	switch d := x.deact; {
	case d.end != nil:
		d.end(cause)
		d.end = nil
	case d.stop != nil: // its deadline has passed if cause is the give-up
		d.stop()
		d.stop = nil
	}
}

// deactivationOverran gives up on a's OnDeactivate: a is removed now, and
// what waits for it goes to a fresh activation, while the hook goes on
// alone. The hook of a failed instance, before a restart, leaves the
// fresh activation the restart: it waits out the backoff, as after a hook
// that ended in time (finish), and keeps the restart history.
func (p *partition) deactivationOverran(a *act) {
	h := a.ID.Hash()
	if cur, ok := p.dir.Get(a.ID, h); !ok || cur != a || a.State() != activation.Deactivating {
		return // it finished in time
	}
	p.s.log(slog.LevelWarn, "granary: OnDeactivate overran its timeout; the grain was removed without it", "grain", a.ID.String())
	p.endDeactCtx(a, errDeactivationOverran)
	if x := a.x.Load(); x != nil && x.deact != nil {
		x.deact.abandoned = true
		p.abandoned++
		p.waits.dropHook(p.waitKeyOf(a), x.deact) // before what waited runs on a fresh activation
	}
	restarting := p.restartHook(a)
	if restarting && a.wantsDeactivate() {
		// A Deactivate came while the hook ran: the grain goes, as asked,
		// rather than restart, as after a hook that ended in time (finish).
		restarting = false
		p.s.deacts[a.deactReason()].Add(1)
	}
	x := a.x.Load()
	p.remove(a)
	if !restarting {
		return
	}
	b, ok := p.dir.Get(a.ID, h) // made for what waited (remove)
	if !ok {
		if p.mode != modeRunning {
			return // nothing waits, and the silo is going: no restart
		}
		// Nothing waited: the restart is still the grain's, as restartNow
		// rebuilds the grain whether or not messages wait.
		b = p.activate(a.k, a.ID, h)
		p.makeReady(b)
	}
	// The fresh activation keeps the restart history, so that a grain that
	// keeps failing is still stopped at its limit.
	b.extra().restarts = x.restarts
	if backoff := x.deact.backoff; backoff > 0 && p.mode == modeRunning {
		_ = b.Transition(activation.Backoff) // its ready step passes it by until then
		p.backOff(b, backoff)
	}
}

// remove takes a out of the directory. Messages that waited for it go to a
// fresh activation (Orleans forwards the same way), unless the grain was
// stopped or the silo is closing.
func (p *partition) remove(a *act) {
	_ = a.Transition(activation.Gone)
	a.endHolding() // a turn of it given up on, or cut off by Close, holds nothing now
	p.floodOver(a)
	p.keepStopLine(a)
	if p.backoffs != nil {
		p.endBackoff(a)
	}
	h := a.ID.Hash()
	if cur, ok := p.dir.Get(a.ID, h); ok && cur == a { // never a successor's entry
		p.dir.Delete(a.ID, h)
		a.k.active.Add(-1)
	}
	p.wheel.Remove(&a.idle)
	if p.lru != nil {
		p.lru.Remove(a.ID)
	}
	p.stopTimers(a)
	if a.isOverfull() {
		p.setOverfull(a, false)
	}
	if h := p.holderOf(a); h != nil {
		p.openDoor(h) // a successor's senders do not wait for it; holding drops the hold
	}
	p.endGrace(a) // an activation given up on while its turn ran on (acttimeout.go)
	if a.Mailbox.Len() == 0 {
		return
	}
	switch {
	case p.mode == modeClosing:
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonShutdown, nil) })
	case a.isStopping() && !a.stoppedExplicitly() && p.inQuarantine(a.ID, a.k):
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonStopped, nil) })
	default:
		// After an explicit Stop, only messages sent after it are left;
		// after a supervision stop, only those that came once its
		// quarantine was over (enqueue).
		var waiting []queues.Envelope
		p.mbDrain(a, func(e queues.Envelope) { waiting = append(waiting, e) })
		if len(waiting) == 0 {
			return // only timer ticks were waiting: nothing reactivates the grain
		}
		b := p.activate(a.k, a.ID, h)
		for _, e := range waiting {
			p.mbPush(b, e)
		}
		p.makeReady(b)
		if b.Mailbox.Len() >= b.k.maxBacklog && b.k.overflow == RejectNewest {
			p.setOverfull(b, true)
		}
	}
}

// finish applies a finished turn's outcome. It never runs a turn itself: it
// readies the activation, and runReady takes the next step.
func (p *partition) finish(a *act, res *turnResult, first *queues.Envelope) {
	// (A plain tell's turn ends in finishPlain, which does what follows for
	// that case: a change here may be one there.)
	if res.firstOut {
		p.firstsOut.Add(-1) // first is here: a closing partition may stop
	}
	if res.err != nil && (res.kind == tkMessage || res.ranMsg) {
		if a.State() <= activation.Active {
			if !res.decided {
				// Every failed turn asks its Decider on its own goroutine
				// (decideInTurn, decideGoexited): the owner runs none of the
				// program's code for it, so nothing here can stall or end it.
				res.directive, res.decided = activation.DefaultDecider(a.ID, res.err), true
			}
			if res.req == nil {
				p.tellFailed(a, res)
			}
		} else {
			res.decided = false // a grain on its way out since: nothing to apply
		}
	}
	if res.req != nil && (res.kind == tkMessage || res.ranMsg) {
		defer p.resolve(res.req, res.reply, res.err) // after the turn's effects, whatever path finish takes
	}
	a.Turns--
	p.inflight--
	if res.holds {
		a.endHolding()
	}
	if res.gaveUp || res.kind == tkDeactivate && deactAbandoned(a) {
		p.abandoned--
	}
	p.nHandled++
	if a.isWorker() {
		p.swBusy.Add(-1) // as inflight: counted up where a turn begins
	}
	if a.State() == activation.Gone { // a Close (or a give-up) removed it while the turn ran
		if first != nil { // an activation that failed after the close
			p.s.deadLetter(*first, grain.ReasonShutdown, nil)
		}
		return
	}
	switch res.kind {
	case tkActivate:
		if res.err != nil && !res.ranMsg {
			p.activationFailed(a, res.err, first)
			return
		}
		_ = a.Transition(activation.Active)
		p.activationSucceeded(a.ID)
		if !p.afterMessage(a, res) {
			return
		}
	case tkDeactivate:
		if x := a.x.Load(); x != nil && x.deact != nil && x.deact.timer != nil {
			x.deact.timer.Stop()
			x.deact.timer = nil
		}
		p.endDeactCtx(a, context.Canceled)
		if res.err != nil {
			p.s.log(slog.LevelWarn, "granary: OnDeactivate failed", withStack([]any{"grain", a.ID.String(), "err", res.err}, res.err)...)
		}
		if p.restartHook(a) {
			if !a.wantsDeactivate() {
				p.restartNow(a, a.x.Load().deact.backoff)
				return
			}
			// A Deactivate came while the hook ran: the grain goes, as
			// asked, rather than restart; what waits goes to a fresh
			// activation (remove), as after any deactivation.
			p.s.deacts[a.deactReason()].Add(1)
		}
		p.remove(a)
		return
	case tkMessage:
		if !p.afterMessage(a, res) {
			return
		}
	}
	if a.busy() {
		p.flushMailbox(a) // room for what waits, if interleaving was at its limit
		return
	}
	if p.mode == modeClosing { // Close came while the turn ran
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonShutdown, nil) })
		if a.State() != activation.Activating {
			_ = a.Transition(activation.Deactivating)
		}
		p.remove(a)
		return
	}
	p.afterTurn(a)
}

// afterTurn readies a for its next step, if it has one, once a turn of it
// has ended and it is served again.
func (p *partition) afterTurn(a *act) {
	if a.wantsDeactivate() || a.Mailbox.Len() > 0 {
		p.makeReady(a)
	}
	if a.isOverfull() && p.served(a) {
		// Filled while its turn was off the partition, and served again:
		// its senders wait for room now, not refused (slice.go). Refused
		// until its backlog went below the limit, a loop of tells to a
		// counter whose turn was handed off for want of a core lost half.
		p.setOverfull(a, false)
		if n := a.Mailbox.Len(); n >= a.k.maxBacklog {
			p.hold(a, n)
		}
	}
}

// finishPlain is finish for a tell's turn that returned no error, of a grain
// with nothing asked of the silo (no extra record: no timer, no request,
// no directive, no call out), active, and not a stateless worker, in a
// running partition: what most turns are. It reports false, having done
// nothing, for any other. It does what finish and afterMessage do in that
// case, without their frames, their checks of what cannot be, and
// finish's deferred answer: BenchmarkTurnDispatch/plain 0.87x. endTurn
// tries it first.
func (p *partition) finishPlain(a *act) bool {
	if a.x.Load() != nil || a.isWorker() || a.State() != activation.Active || p.mode != modeRunning {
		return false
	}
	a.Turns--
	p.inflight--
	p.nHandled++
	p.touchFor(a, a.k.idleTimeout)
	if a.busy() {
		p.flushMailbox(a)
		return true
	}
	p.afterTurn(a)
	return true
}

// closedTurns reports whether Close (or a Shutdown past its deadline) has
// ended the partition's turns' ctxs: a turn that ends or fails from then
// on most likely does so because of it, and its outcome is the close's
// (resolve, failActivation, tellFailed). endBase sets it, before the turns
// see their ctxs end.
func (p *partition) closedTurns() bool { return p.base.Err() != nil }

// resolve answers an ask whose turn finish has just counted. The count is
// published first, so a caller holding its reply finds its turn in
// Stats().Handled (other turns are published once per round).
//
// A turn that ends once Close has ended the turns' ctxs fails its ask with
// ErrSiloClosed, whatever its handler returned — most likely the ctx's
// context.Canceled, which its caller never asked for. A turn handed off is
// answered so by closeAll; one that held its partition ends before its
// owner takes Close's message, and comes here first.
func (p *partition) resolve(req *queues.Request, v any, err error) {
	p.handled.Store(p.nHandled)
	p.answered++
	if p.closedTurns() {
		v, err = nil, errClosedMidTurn
	}
	req.Resolve(v, err)
}

// decideInTurn asks the kind's Decider what to do about a failed turn, on
// the turn's own goroutine before the turn ends: the Decider is the
// program's code, and one that blocks — that calls a grain to report the
// failure, say — is then handed off by the watchdog as a blocking handler
// is, and holds up no other grain (TestABlockingDeciderHoldsUpNoOtherGrain;
// on the owner, it stalled the partition). finish applies the directive if
// the grain is still active then. One that calls runtime.Goexit ends the
// turn's goroutine: the turn's outcome goes to the owner with the default
// directive (goexit.go: w.deciding). It runs before the turn gives up its
// token and its ctx, which a ContextDecider is given: its calls are the
// turn's.
func (p *partition) decideInTurn(w *worker, a *act, res *turnResult, ctx context.Context) {
	if res.err == nil || res.decided || (res.kind != tkMessage && !res.ranMsg) {
		return
	}
	w.deciding = true
	res.directive = p.askDecider(ctx, a, res.err)
	res.decided = true
	w.deciding = false
}

// askDecider runs the kind's Decider for a turn that failed with err. One
// that panics, or returns a directive that is none of Restart, Resume and
// Stop, is logged, and the default directive applies. One that calls
// runtime.Goexit is not recovered: its goroutine ends, and the caller's
// defers see it.
func (p *partition) askDecider(ctx context.Context, a *act, err error) (d activation.Directive) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			d = activation.DefaultDecider(a.ID, err)
			p.s.log(slog.LevelError, "granary: Decider panicked; the default directive applies",
				"grain", a.ID.String(), "panic", fmt.Sprint(r), "err", err)
		}
	}()
	if cd, ok := a.k.sup.Decider.(activation.ContextDecider); ok {
		d = cd.DecideContext(ctx, a.ID, err)
	} else {
		d = a.k.sup.Decider.Decide(a.ID, err)
	}
	returned = true
	if d > activation.Stop {
		p.s.log(slog.LevelError, "granary: Decider returned an undefined directive; the default directive applies",
			"grain", a.ID.String(), "directive", d.String(), "err", err)
		d = activation.DefaultDecider(a.ID, err)
	}
	return d
}

func (p *partition) logDeciderGoexit(a *act, err error) {
	p.s.log(slog.LevelError, "granary: Decider called runtime.Goexit; the default directive applies",
		"grain", a.ID.String(), "err", err)
}

// tellFailed reports the failure of a turn no caller waits for — a tell's,
// a timer tick's: its error would otherwise go nowhere (the supervision
// policy decides what becomes of the grain, but no one hears why). Orleans
// logs a one-way call's exception the same way.
func (p *partition) tellFailed(a *act, res *turnResult) {
	p.s.failedTells.Add(1)
	msg := msgTellFailed
	if res.tick != nil {
		msg = msgTickFailed
	}
	// Asked first: in a storm the line is most often dropped, and its
	// arguments would cost more than the turn.
	write, dropped := p.s.sampled(msg)
	if !write {
		return
	}
	level := slog.LevelWarn
	switch {
	case matches(res.err, grain.ErrPanic):
		level = slog.LevelError
	case p.closedTurns() && (matches(res.err, context.Canceled) || matches(res.err, grain.ErrSiloClosed)):
		// Close ended the turn's ctx, and the handler said so: the
		// program asked for that, and a Warn for every turn under way
		// was noise. Counted all the same.
		level = slog.LevelDebug
	}
	p.s.write(level, msg, dropped, withStack([]any{"grain", a.ID.String(), "err", res.err, "directive", res.directive.String()}, res.err)...)
}

// matches is errors.Is for an error a grain returned: one whose own Is or
// Unwrap panics, as errors.Is walks its tree, matches nothing, and the
// panic goes no further than here — here is a partition's goroutine.
func matches(err, target error) (is bool) {
	defer func() {
		if recover() != nil {
			is = false
		}
	}()
	return errors.Is(err, target)
}

const (
	msgTellFailed = "granary: a tell's turn failed, with no caller to return the error to"
	msgTickFailed = "granary: a timer tick's turn failed, with no caller to return the error to"
)

// afterMessage applies what a turn asked for (timers, deactivation), keeps
// the idle clock, and applies the supervision policy to a failure. It
// reports false if the grain restarted (nothing more to do for this turn).
func (p *partition) afterMessage(a *act, res *turnResult) bool {
	deact, ops, unkept := a.takeRequests()
	touch := res.tick == nil || a.k.timerKeepAlive
	if unkept {
		p.unkeep(a, touch)
	}
	if touch {
		p.touch(a)
	}
	if res.tick != nil {
		p.tickDone(a, res.tick)
	}
	p.applyTimers(a, ops)
	// Activating too: an interleaved turn can end while the activation turn,
	// which ran the first message, waits in a call.
	if res.decided {
		if d := res.directive; d != activation.Resume {
			if a.busy() {
				// Another turn of the grain waits in a call (reentrancy):
				// the instance cannot be dropped from under it, so the
				// directive waits for the grain's last turn to end.
				a.extra().deferDirective(d)
			} else if !p.supervise(a, d) {
				return false
			}
		}
	}
	if deact && a.busy() {
		// Another turn waits in a call: the grain is not idle yet, and
		// goes on serving what interleaves with that turn — which the turn
		// may be waiting for. It deactivates once its last turn ends.
		a.extra().deactWhenIdle = true
		deact = false
	}
	if !a.busy() && a.State() == activation.Active {
		if x := a.x.Load(); x != nil && (x.deferred != 0 || x.deactWhenIdle) {
			deact = deact || x.deactWhenIdle
			x.deactWhenIdle = false
			if d, ok := x.takeDeferred(); ok {
				if !a.isStopping() && !p.supervise(a, d) {
					return false
				}
			}
		}
	}
	if deact {
		a.wantDeactivate(grain.DeactivationRequested)
	}
	return true
}

// supervise carries out a failure's directive, Restart within the kind's
// restart limit. It reports false if the grain restarted.
func (p *partition) supervise(a *act, d activation.Directive) bool {
	// The history lives in the extra record, made only for a grain that
	// restarts: most grains never fail, and many that fail resume.
	backoff := time.Duration(0)
	if d == activation.Restart {
		d, backoff = a.k.sup.Restart(&a.extra().restarts, p.now)
	}
	switch d {
	case activation.Restart:
		p.restart(a, backoff)
		return false
	case activation.Stop:
		p.stop(a)
	}
	return true
}

// touch restarts a's idle clock: its kind's idle timeout, or a stateless
// identity's spare's (WithSpareIdleTimeout).
func (p *partition) touch(a *act) {
	p.touchFor(a, p.idleTimeoutOf(a))
}

// idleTimeoutOf is how long a may go without a message before it is idle.
func (p *partition) idleTimeoutOf(a *act) time.Duration {
	if a.isWorker() && p.isSpare(a) {
		return a.k.spareIdle
	}
	return a.k.idleTimeout
}

// unkeep files a's idle deadline afresh once a turn cancelled its
// keep-alive (DelayDeactivation with d <= 0). The wheel keeps an entry in
// the slot of the deadline it was filed under until its cursor gets there,
// and a kept grain's is its keep-alive's, far off: re-filed, the grain goes
// idle as usual. A turn that touches the grain files it at its new idle
// deadline just after; one that does not (a timer's tick) leaves it its idle
// clock's deadline, or, if that has passed (kept past it), now: it is
// collected at the next idle round.
func (p *partition) unkeep(a *act, touch bool) {
	if !a.idle.Tracked() {
		return // never idle, or not yet filed
	}
	old := a.idle.Deadline()
	p.wheel.Remove(&a.idle)
	if touch {
		return
	}
	if old > p.now+p.idleTimeoutOf(a) {
		old = p.now // the keep-alive's deadline: the idle clock's has passed
	}
	p.wheel.Touch(&a.idle, old)
}

// touchFor restarts a's idle clock for d (d <= 0: never idle). finishPlain,
// whose grains are no stateless workers, calls it directly: the hot path
// of a plain turn keeps no branch and no call for spares
// (BenchmarkTurnDispatch/plain).
func (p *partition) touchFor(a *act, d time.Duration) {
	if d > 0 {
		if !a.idle.Tracked() {
			p.needIdleTicks()
		}
		p.wheel.Touch(&a.idle, p.now+d)
	}
}

// activationFailed fails every message that waited for the activation and
// forgets it, instance included: the next message tries afresh.
func (p *partition) activationFailed(a *act, err error, first *queues.Envelope) {
	a.g = nil
	p.failActivation(a, err, first)
}

// failActivation is activationFailed but for the instance, which a turn
// given up on may still be setting (acttimeout.go).
//
// One that fails once Close has ended the hooks' ctxs most likely failed
// for that: what waited for it is the close's — reason shutdown, an ask
// failing with ErrSiloClosed — as for a hook that ignores its ctx
// (closeActivations), not an activation failure its callers would take for
// the grain's: the hook's error then is most often its ctx's, nothing more.
func (p *partition) failActivation(a *act, err error, first *queues.Envelope) {
	aerr := &grain.ActivationError{ID: a.ID, Err: err}
	reason, cause := grain.ReasonActivationFailed, error(aerr)
	closed := p.closedTurns()
	if closed {
		reason, cause = grain.ReasonShutdown, nil
	}
	var waiting []queues.Envelope
	p.mbDrain(a, func(e queues.Envelope) { waiting = append(waiting, e) })
	// Out of the directory first, so a caller who sees the error finds the
	// grain gone and its next message tries afresh (or, after repeated
	// failures, fails at once until the backoff is over: actfail.go).
	p.remove(a)
	if !closed {
		p.noteActivationFailure(a, aerr)
	}
	if first != nil {
		p.s.deadLetter(*first, reason, cause)
	}
	for _, e := range waiting {
		p.s.deadLetter(e, reason, cause)
	}
}

// restart carries out supervision's Restart of a, whose turn failed: the
// failed instance's OnDeactivate runs first, if it has one, with
// gc.DeactivationReason() DeactivationFailed — as Akka runs postStop
// before a restart and protoactor sends Restarting: the instance may hold
// what only it can let go (a subscription, a file, a goroutine it
// started), and it is told its state is not to be saved. The grain stays
// in the directory meanwhile, its messages waiting in its mailbox; when
// the hook has ended (finish), restartNow drops the instance. A grain
// without the hook restarts at once.
func (p *partition) restart(a *act, backoff time.Duration) {
	p.s.restarts.Add(1)
	if _, hook := a.g.(grain.Deactivator); hook && a.State() == activation.Active {
		if !a.wantsDeactivate() {
			a.extra().deact = &deactHook{restart: true, backoff: backoff}
		}
		// Else asked to go while the turn ran (a Deactivate, a Stop): it
		// goes, as asked, with no fresh instance — its hook told of the
		// failure, which is the reason it gives whatever asked before it.
		a.setDeactWant(false)
		a.wantDeactivate(grain.DeactivationFailed)
		p.makeReady(a) // the hook's turn before any message (advance)
		return
	}
	p.restartNow(a, backoff)
}

// restartHook reports whether a's deactivation under way, or about to
// begin, runs the failed instance's hook before a restart (restart) — not
// if a Stop came since: then the grain goes, as a stopped one does.
func (p *partition) restartHook(a *act) bool {
	x := a.x.Load()
	return x != nil && x.deact != nil && x.deact.restart && !a.isStopping()
}

// restartNow drops the failed instance and builds a fresh one after
// backoff. Messages wait in the mailbox meanwhile. Once a Shutdown has
// begun, no backoff is waited out: the work queued for the grain is to
// finish, and a backoff on a clock that does not move (a test's) would
// hold the Shutdown until its deadline.
func (p *partition) restartNow(a *act, backoff time.Duration) {
	_ = a.Transition(activation.Backoff)
	p.stopTimers(a)
	a.g = nil
	if x := a.x.Load(); x != nil {
		x.mu.Lock()
		x.deactivate, x.keepUntil, x.timerOps = false, 0, nil
		x.deferred, x.deactWhenIdle, x.holding = 0, false, false
		x.refuse = refuseNone // set for the failed instance's OnDeactivate
		x.mu.Unlock()
		x.deactReason, x.deact = grain.DeactivationNone, nil
	}
	if backoff <= 0 || p.mode != modeRunning {
		p.rebuild(a)
		return
	}
	p.backOff(a, backoff)
}

// backOff restarts a once backoff has passed (backoffOver). The backoff
// waits in the partition's timer heap, beside its grains' timers, under
// the one clock timer that wakes the owner for the earliest: a clock timer
// of its own, for each grain backing off, made a runtime timer and a
// closure, and a goroutine as it fired (the real clock's AfterFunc), whose
// push then took the queue's lock — a quarter of the CPU of a storm of
// 200,000 grains restarting (docs/performance-log.md, item 91), and the
// goroutines' structs the runtime keeps for good. A grain gone meanwhile
// (a Stop ends a backoff) or a partition that stops takes its entry out
// (endBackoff, stopWake): a clock timer left set kept the silo from the
// garbage collector until it fired
// (TestARestartBackoffsTimerGoesWithItsGrainAndSilo).
func (p *partition) backOff(a *act, backoff time.Duration) {
	if p.backoffs == nil {
		p.backoffs = make(map[*act]*grainTimer)
	}
	gt := &grainTimer{a: a, index: -1, backoff: true}
	p.backoffs[a] = gt
	p.schedule(gt, backoff)
	p.armTimers()
}

// backoffOver restarts the grain whose backoff gt has passed: it activates
// afresh, its messages waiting meanwhile in its mailbox next — or, with the
// silo settling and nothing waiting, it goes.
func (p *partition) backoffOver(gt *grainTimer) {
	a := gt.a
	if p.backoffs[a] != gt {
		return // not a's backoff any more (endBackoff takes it out of the heap: not expected)
	}
	p.forgetBackoff(a)
	if cur, ok := p.dir.Get(a.ID, a.ID.Hash()); ok && cur == a && a.State() == activation.Backoff {
		if p.mode == modeRunning || a.Mailbox.Len() > 0 {
			_ = a.Transition(activation.Activating)
		} else {
			a.wantDeactivate(grain.DeactivationShutdown)
		}
		p.makeReady(a)
	}
}

// endBackoff ends a's backoff, if it has one.
func (p *partition) endBackoff(a *act) {
	if gt, ok := p.backoffs[a]; ok {
		p.unschedule(gt)
		p.forgetBackoff(a)
		p.armTimers()
	}
}

// forgetBackoff drops a's backoff from the partition's, leaving the map nil
// when none is left: remove, on every grain's way out, looks only while a
// backoff is under way.
func (p *partition) forgetBackoff(a *act) {
	delete(p.backoffs, a)
	if len(p.backoffs) == 0 {
		p.backoffs = nil
	}
}

// rebuild readies a, whose failed instance was dropped, for a fresh one:
// its next step is the activation turn.
func (p *partition) rebuild(a *act) {
	_ = a.Transition(activation.Activating)
	p.makeReady(a)
}

// stop quarantines the grain and deactivates it; what waits for it is a dead
// letter.
func (p *partition) stop(a *act) {
	p.s.stops.Add(1)
	if _, again := p.quarantine[a.ID]; !again && a.isWorker() {
		p.swSickIDs[a.bucket()].Add(1) // senders go to the identity's other activations meanwhile
	}
	p.quarantine[a.ID] = p.now + a.k.sup.Quarantine
	notePeak(&p.quarPeak, len(p.quarantine))
	p.needIdleTicks()
	p.halt(a, grain.DeactivationFailed)
}

// stopRequested carries out Silo.Stop. The messages queued ahead of the
// request are the first c.ahead of the batch drained with it (read after
// it): they, and those already in the grain's mailbox, were sent before the
// Stop and become dead letters; later ones wait for a fresh instance.
func (p *partition) stopRequested(c ctl) {
	sp := stopPoint{set: true, seq: p.batch.Seq(), ahead: c.ahead}
	a, ok := p.dir.Get(c.first.Target, c.first.Hash)
	if !ok {
		// Not active; messages ahead of the request may be about to
		// activate it. They were sent before the Stop.
		if c.ahead > 0 {
			if p.stopsAhead == nil {
				p.stopsAhead = make(map[grain.ID]stopPoint)
			}
			p.stopsAhead[c.first.Target] = sp
		}
		return
	}
	a.extra().stopAt = sp
	if a.isStopping() || a.State() >= activation.Deactivating {
		// Already on its way out: what waits for it was sent before this
		// Stop. Stopped by supervision too: what comes in its quarantine
		// is a dead letter anyway, but the quarantine may end before the
		// grain is gone (its last turn, or OnDeactivate, runs on), and
		// what comes then waits for the fresh instance — not what was sent
		// before this Stop
		// (TestAStopDrawsItsLineThoughTheGrainsQuarantineEndsFirst).
		a.setStopping(true)
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonStopped, nil) })
		return
	}
	p.halt(a, grain.DeactivationStopped)
}

// keepStopLine keeps the line of a Stop of a, read with this batch, among
// the batch's messages not yet delivered, as a goes: they were sent before
// the Stop, and are dead letters, as for a grain that was not active when
// its Stop came (stopRequested) — not a fresh activation's first messages.
// a goes before them when its hook's end is read in the same round, after
// the Stop (TestAMessageSentBeforeAStopIsADeadLetterThoughTheGrainWentMeanwhile).
func (p *partition) keepStopLine(a *act) {
	x := a.x.Load()
	if x == nil || !x.stopAt.set || x.stopAt.seq != p.batch.Seq() || p.batch.Taken() >= x.stopAt.ahead {
		return
	}
	if p.stopsAhead == nil {
		p.stopsAhead = make(map[grain.ID]stopPoint)
	}
	p.stopsAhead[a.ID] = x.stopAt
}

// stoppedAhead reports whether env, not for an active grain, was sent before
// a Stop of its grain read in this batch (see stopRequested).
func (p *partition) stoppedAhead(env *queues.Envelope) bool {
	sp, ok := p.stopsAhead[env.Target]
	return ok && !sp.after(p.batch.Seq(), p.batch.Taken()-1)
}

// halt deactivates a, for why (a Stop, or supervision's after a failure),
// and makes every message waiting for it, or arriving before it is gone, a
// dead letter.
func (p *partition) halt(a *act, why grain.DeactivationReason) {
	a.setStopping(true)
	if a.k.interleaves() {
		// It lets nothing in from now on but calls back on its waiting
		// turns' chains: their calls are edges a deadlock walk reads —
		// under the key they were made under (turnInfo.waitKey): a
		// stateless activation's own. Marked under its identity's hash,
		// the calls a reentrant stateless activation had out as it was
		// stopped stayed edges of a grain that lets others in, and a
		// cycle through the messages held behind it waited for the
		// deadlines (the chaos program, -kinds swre -stop 50).
		p.waits.hold(a.ID, p.waitKeyOf(a), &a.extra().held)
	}
	p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonStopped, nil) })
	a.setDeactWant(false) // a stop is the reason, whatever asked before it
	a.wantDeactivate(why)
	p.makeReady(a)
}

func (p *partition) mbPush(a *act, env queues.Envelope) {
	a.Mailbox.PushWith(env, &p.s.mailboxes)
	p.backlog.Add(1)
	countMayGoIn(a, &env, 1)
}

// countMayGoIn adds d to a's counts of what waits in its mailbox and may
// go in beside a waiting turn (actExtra.mayIn, turnAsks): a message its
// kind's WithMayInterleave predicate let in, and an ask from a turn (to a
// reentrant kind, or let in by the predicate), which goes in past the
// bound on interleaved turns (turnsAsk).
func countMayGoIn(a *act, env *queues.Envelope, d int32) {
	if env.Meta == nil || !env.Meta.MayInterleave && (env.Request == nil || !a.k.reentrant) {
		return
	}
	x := a.extra()
	if env.Meta.MayInterleave {
		x.mayIn += d
	}
	if env.Request != nil {
		x.turnAsks += d
	}
}

func (p *partition) mbPop(a *act) (queues.Envelope, bool) {
	env, ok := a.Mailbox.PopWith(&p.s.mailboxes)
	if ok {
		p.mbPopped(a, &env)
	}
	return env, ok
}

// mbDropOldest removes a's oldest waiting message to make room (DropOldest),
// passing over the timer ticks ahead of it, and makes it a dead letter. A
// tick is no message anyone sent: it belongs to its timer, whose next tick
// is scheduled only once this one has run (tickDone), so a tick dropped
// ended its timer for good — and counted as a dead letter. It reports false
// if only ticks wait.
func (p *partition) mbDropOldest(a *act) bool {
	env, ok := a.Mailbox.PopFirst(isTick)
	if ok {
		p.mbPopped(a, &env)
		p.s.deadLetter(env, grain.ReasonOverload, nil)
	}
	return ok
}

// mbDropNewest makes dead letters of a's waiting messages past its first
// keep (RejectNewest), keeping the timer ticks among them (see
// mbDropOldest). It takes time in proportion to the backlog: it runs when
// a grain's grace ends with its backlog past its limit (graceEnded).
func (p *partition) mbDropNewest(a *act, keep int) {
	var waiting []queues.Envelope
	a.Mailbox.DrainWith(func(e queues.Envelope) {
		p.mbPopped(a, &e)
		waiting = append(waiting, e)
	}, &p.s.mailboxes)
	for _, e := range waiting {
		switch {
		case e.Tick() != nil:
			p.mbPush(a, e)
		case keep > 0:
			keep--
			p.mbPush(a, e)
		default:
			p.s.deadLetter(e, grain.ReasonOverload, nil)
		}
	}
}

func isTick(e *queues.Envelope) bool { return e.Tick() != nil }

// mbPopped counts env out of a's mailbox.
func (p *partition) mbPopped(a *act, env *queues.Envelope) {
	p.backlog.Add(-1)
	countMayGoIn(a, env, -1)
}

// mbDrain empties a's mailbox, calling f for each message. Timer ticks are
// dropped: they belong to the activation that started the timer, and must
// neither reactivate a grain nor count as undelivered messages.
func (p *partition) mbDrain(a *act, f func(queues.Envelope)) {
	p.backlog.Add(-int64(a.Mailbox.Len()))
	if x := a.x.Load(); x != nil {
		x.mayIn, x.turnAsks = 0, 0
	}
	a.Mailbox.DrainWith(func(e queues.Envelope) {
		if e.Tick() == nil {
			f(e)
		}
	}, &p.s.mailboxes)
}
