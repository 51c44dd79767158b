package silo

import (
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Delivery: how a partition owner routes a message to its activation,
// creating the activation on the first message, and which step of a grain
// runs next.

// deliver routes one envelope to its activation, activating the grain if it
// has none. It runs the turn at once when the grain is idle.
func (p *partition) deliver(w *worker, env *queues.Envelope) bool {
	return p.deliverGuessed(w, env, p.dir.Guess(env.Hash))
}

// deliverGuessed is deliver with the directory's guess for env's hash
// (directory.Table.Guess) made already: now, or earlier with no entry
// removed since (step keeps the guesses it prefetched with).
func (p *partition) deliverGuessed(w *worker, env *queues.Envelope, a *act) bool {
	if p.mode == modeClosing {
		p.s.deadLetter(*env, grain.ReasonShutdown, nil)
		return true
	}
	// The entry the hash leads to is the grain's, most often: compared here,
	// inline, the full lookup (the identity through the table's idOf) only
	// when it is not.
	ok := a != nil && a.ID.Equal(&env.Target)
	if !ok {
		a, ok = p.dir.Get(env.Target, env.Hash)
	}
	if !ok {
		k := p.s.kinds[env.Target.Kind()] // never nil: a send checks the kind
		if k.workers > 1 {
			p.swQueued.Add(-1) // counted by its sender (stateless.go)
		}
		if p.stopsAhead != nil && p.stoppedAhead(env) {
			p.s.deadLetter(*env, grain.ReasonStopped, nil)
			return true
		}
		if p.inQuarantine(env.Target, k) {
			p.s.deadLetter(*env, grain.ReasonQuarantined, nil)
			return true
		}
		if p.actFails != nil && p.refusedAfterFailures(env) {
			return true
		}
		if env.Request != nil && p.dropExpired(env) {
			return true // nothing waits for it: no activation for nobody
		}
		// The activation turn runs the first message too, so it needs no
		// mailbox: most grains never have one.
		a = p.activate(k, env.Target, env.Hash)
		p.ranInline(a)
		p.takenAt(a, env)
		return p.runTurn(w, a, tkActivate, env)
	}
	if a.isWorker() {
		p.swQueued.Add(-1)
	}
	return p.enqueue(w, a, env)
}

// enqueue gives env to a: at once if a is idle, else into its mailbox,
// applying the backlog limit.
func (p *partition) enqueue(w *worker, a *act, env *queues.Envelope) bool {
	if p.callsBackWaitingTurn(a, env) {
		// Part of the turn in progress, which a stop or a deactivation lets
		// finish: only this instance can answer it, so it runs here
		// whatever is pending. Queued behind the stop, it would wait for
		// the instance that waits for it, until the chain's deadline.
		p.interleave(a, *env)
		return true
	}
	if a.isStopping() {
		switch {
		case a.stoppedExplicitly() && !p.sentAfterStop(a):
			p.s.deadLetter(*env, grain.ReasonStopped, nil)
			return true
		case p.inQuarantine(a.ID, a.k): // a stop by supervision, before a Stop's line or after it
			p.s.deadLetter(*env, grain.ReasonQuarantined, nil)
			return true
		}
		// Stopped by supervision, its quarantine over, but not gone yet:
		// its OnDeactivate runs on. The message waits in the mailbox for
		// the fresh instance that follows (remove), as the quarantine
		// promises, and as one sent after an explicit Stop does.
	}
	if a.wantsDeactivate() && a.State() == activation.Active && idleReason(a.deactReason()) && !a.isStopping() &&
		(p.lru == nil || p.lru.Contains(a.ID)) {
		// Taken for idle (or shed as the most idle) and not gone yet — the
		// ready list steps a slice a round, so a burst's last grains wait —
		// it is not idle any more: it stays, rather than go and come back
		// for this message (OnDeactivate, then OnActivate: a save and a
		// load for nothing). Not if it was also chosen for eviction, which
		// counted it out of the activation cap (evict), or asked to go
		// (wantDeactivate keeps the request's reason).
		a.setDeactWant(false)
	}
	deferred := false
	if a.State() == activation.Active && !a.wantsDeactivate() && !a.busy() && a.Mailbox.Len() == 0 {
		if !p.overSlice(a) && (a != p.lastRan || p.streak < streakFrom-1 || !p.floodStreak()) {
			p.ranInline(a)
			if p.lru != nil {
				p.lru.Get(a.ID)
			}
			p.takenAt(a, env)
			return p.runTurn(w, a, tkMessage, env)
		}
		// It ran this round, when the monitor looked, and the round has
		// had its slice, or its last few messages in a row were slow: the
		// message waits for the grain's step, behind the partition's other
		// work (slice.go).
		deferred = true
	}
	// A busy grain that lets env in (a reentrant kind, or one whose
	// WithMayInterleave predicate took env; its first turn included:
	// activation and first message run as one) takes env now if a turn
	// waits in a call — after what waits in its mailbox and may go in too,
	// which came first. (Calls back on a waiting turn's chain, of any kind,
	// were let in above.) With room left after the flush, nothing that may
	// go in is left in the mailbox.
	if p.letsIn(a, env) && (p.interleaveRoom(a) || turnsAsk(env)) {
		p.flushMailbox(a)
		if p.interleaveRoom(a) {
			p.interleave(a, *env)
			return true
		}
		if turnsAsk(env) {
			// A turn's ask past the bound: what may go in and waits ahead
			// of it goes first, its sender's earlier messages among them.
			p.letInAhead(a, a.Mailbox.Len())
			p.interleave(a, *env)
			return true
		}
	}
	if a.Mailbox.Len() == 0 && !(env.Meta != nil && env.Meta.MayInterleave) && p.mayHold(a) {
		// A message a oneHolds kind's predicate does not take, to a grain
		// whose turns under way hold nothing (let in beside a holder that
		// has ended): it goes in beside them, and holds it (holding.go).
		p.interleaveHolding(a, *env)
		return true
	}
	if env.Request != nil && env.Meta != nil {
		// An ask from a grain's turn, about to wait: the one step that can
		// close a deadlock across call chains — behind a busy grain, or
		// behind a stateless activation's mailbox, which a turn that
		// waits on the asking grain may begin before it.
		if env.Request.Interleave {
			// A call back on a chain whose turn of a's no longer waits
			// (it gave up, and ended): it waits for a's turns like any
			// other ask, and a walk through it must say so (walk.via).
			env.Request.SetInLine()
		}
		if a.isWorker() {
			if p.forwardWorker(a, env) {
				return true
			}
			// It waits here, behind this activation of the identity's
			// several: where a walk that reaches it looks (closesCycle).
			env.Request.SetQueuedAt(p.idx)
		}
		if a.busy() && p.breakDeadlock(env, a) {
			return true
		}
	}
	if a.Mailbox.Len()+1 >= a.k.maxBacklog && p.backlogFull(a, env) {
		// Past the full backlog of a grain whose turns do not run: sent
		// before its door shut (RejectNewest), it goes as those sent after
		// do, though its sender had nil — a dead letter, which a tell's
		// sender hears of in the log. Kept, it let the backlog pass its
		// limit by all that was in flight: a loop of 100 tells to a
		// blocked grain with a limit of 10 had every one accepted.
		p.s.deadLetter(*env, grain.ReasonOverload, nil)
		return true
	}
	p.mbPush(a, *env)
	if deferred {
		p.makeReady(a)
	}
	if p.mode != modeRunning && a.State() == activation.Backoff {
		// A Shutdown waits out no backoff (see restart): a message that
		// comes for a grain in one while the silo settles restarts it.
		p.rebuild(a)
	}
	return true
}

// takenAt records, for an ask from a grain's turn that a stateless
// activation takes at once, where it runs: a deadlock walk that reaches
// the identity finds the activation by it (closesCycle), as it finds the
// one an ask waits behind (enqueue). Only queued asks recorded it, and a
// cycle through an activation that took its call at once waited for the
// call's deadline.
func (p *partition) takenAt(a *act, env *queues.Envelope) {
	if env.Request != nil && env.Meta != nil && a.isWorker() {
		env.Request.SetQueuedAt(p.idx)
	}
}

// backlogFull applies a's backlog limit to env, the message about to join
// its mailbox, which would fill it (or is past it), and reports whether env
// is refused.
func (p *partition) backlogFull(a *act, env *queues.Envelope) bool {
	if p.sentBeforeShutdown(a) {
		return false
	}
	if p.served(a) || p.graced(a) || p.waitGrace(a) {
		// Its turns run, one a step, but slower than it is sent messages:
		// its senders wait at its door until it has room (slice.go,
		// door.go) — in a grace too, its turn maybe only waiting for a
		// core, or waiting off the partition for a moment (holdgrace.go).
		// Its backlog, as the log says, counts env, which goes in.
		p.hold(a, a.Mailbox.Len()+1)
		return false
	}
	n := a.Mailbox.Len()
	if len(p.holders) > 0 {
		n -= p.heldBase(a) // what it held while served does not count (hold)
	}
	if n >= a.k.maxBacklog {
		switch a.k.overflow {
		case DropOldest:
			p.mbDropOldest(a)
		default:
			// RejectNewest refuses at the door (Silo.push, through the
			// overloaded set), and here what was in flight as it shut. A
			// timer's tick goes in all the same: it is no message anyone
			// sent, and dropped, it would end its timer (mbDropOldest).
			p.setOverfull(a, true)
			return env.Tick() == nil
		}
	} else if a.k.overflow == RejectNewest && n+1 >= a.k.maxBacklog {
		p.setOverfull(a, true) // before the push: once the backlog shows full, senders are refused
	}
	return false
}

// sentBeforeShutdown reports whether the message being delivered, past a's
// full backlog as the silo settles, was sent before the Shutdown, to a grain
// whose turns run (or whose first, its activation's, does): work under way,
// which a Shutdown finishes. It goes into a's backlog as it would have the
// moment before — a running silo holds a grain's senders, not what they sent —
// rather than becoming an overload dead letter after its Tell returned nil:
// two producers' 2,000 tells to a grain of 1 ms turns and a limit of 100, all
// queued as the Shutdown began, lost 900
// (TestAShutdownFinishesWhatWasSentBeforeIt). What turns send as the silo
// settles meets the limit as always: it bounds a grain that sends itself ever
// more work.
func (p *partition) sentBeforeShutdown(a *act) bool {
	return p.mode == modeSettling && !p.shutAt.after(p.batch.Seq(), p.batch.Taken()-1) &&
		a.State() <= activation.Active && !a.wantsDeactivate() && !a.isStopping()
}

// idleReason reports whether r is a deactivation for want of use, which a
// message calls off: idleness, or shedding under memory pressure (which
// takes the most idle). An eviction is not: the activation cap counts the
// grain out as it is chosen.
func idleReason(r grain.DeactivationReason) bool {
	return r == grain.DeactivationIdle || r == grain.DeactivationMemoryPressure
}

// requestedReason reports whether r is a deactivation someone asked for —
// Silo.Deactivate or the grain's DeactivateOnIdle, a Stop, a shutdown —
// which nothing calls off.
func requestedReason(r grain.DeactivationReason) bool {
	return r == grain.DeactivationRequested || r == grain.DeactivationStopped || r == grain.DeactivationShutdown || r == grain.DeactivationFailed
}

// sentAfterStop reports whether the message being delivered (the last one
// taken from the batch) was sent after an explicit Stop of a: then it waits
// in a's mailbox for the fresh activation that follows a (see remove).
func (p *partition) sentAfterStop(a *act) bool {
	x := a.x.Load()
	return x != nil && x.stopAt.after(p.batch.Seq(), p.batch.Taken()-1)
}

// activate creates the activation of id; the caller runs its activation
// turn or readies it. With an activation cap, the least recently used idle
// grain is asked to deactivate first.
func (p *partition) activate(k *kind, id grain.ID, h uint64) *act {
	a := &act{k: k}
	if k.workers > 1 {
		a.Marks = markWorker
	}
	a.ID = id
	p.dir.Put(id, h, a)
	k.active.Add(1)
	if p.lru != nil {
		p.lru.Add(id, a)
		p.evict()
	}
	return a
}

// evict asks least recently used idle grains to deactivate until the
// partition is within its cap, not counting grains already on their way out.
func (p *partition) evict() {
	over := p.lru.Len() - p.limit
	for tries := p.lru.Len(); over > 0 && tries > 0; tries-- {
		id, a, ok := p.lru.GetOldest()
		if !ok {
			return
		}
		if a.State() == activation.Active && !a.busy() && a.Mailbox.Len() == 0 {
			p.lru.Remove(id) // out of the count now; gone once OnDeactivate ran
			a.wantDeactivate(grain.DeactivationEvicted)
			p.makeReady(a)
			p.evicted++
			over--
			continue
		}
		p.lru.Get(id) // busy or not active yet: look further
	}
}

// stepEvicted takes as many ready steps as the round's deliveries have
// evicted grains so far, before it delivers more: a burst of new grains
// past the activation cap took a whole batch of them — up to a queue's
// worth, thousands — each activated at once while the grains it evicted
// waited for the round's end to deactivate, so the activations alive, their
// state loaded, passed the cap by that much (9,100–12,600 on two
// partitions, against a cap of 1,000). It reports false when w no longer
// owns the partition.
func (p *partition) stepEvicted(w *worker) bool {
	n := p.evicted
	p.evicted = 0
	return p.runReady(w, n)
}

func (p *partition) makeReady(a *act) {
	if a.isReady() {
		return
	}
	a.setInReady(true)
	p.ready = append(p.ready, a)
}

// runReady steps the ready activations in turn, one step each, up to
// budget steps: what is left waits for the next round, behind the
// messages that came meanwhile. A burst of lifecycle work — half a million
// grains idle at once, each to deactivate — would otherwise hold every
// other grain of the partition for the whole of it (a live grain's ask
// waited 0.25 s for a million grains, 2.4 s when each had an OnDeactivate:
// TestAMassDeactivationHoldsUpNoLiveGrain).
//
// A grain whose backlog is not drained by its step is ready again, behind
// the others, and steps again in this round if the budget allows: the
// budget is at least the messages the round delivered, so the backlogs
// keep pace with them. Stepped once a round instead, a hot grain that fell
// behind once (a lobby whose turn was handed off while its players joined)
// stayed behind while it was sent more than a message a round, until its
// backlog limit refused them (TestABackloggedGrainKeepsPace).
func (p *partition) runReady(w *worker, budget int) bool {
	if p.rhead == len(p.ready) {
		return true
	}
	// Every grain ready now steps before a slice can end the steps, and
	// only a grain with a deep backlog stepping again (a flood's) ends it:
	// a cut in a partition behind with many grains ready kept it behind
	// (slice.go).
	first := len(p.ready) - p.rhead
	if p.ready[p.rhead] == p.flooder || p.steppedFor {
		p.steppedFor = false
		p.answeredYield()
	}
	clk := stepClock{next: 1, took: -1}
	var last *act // the grain stepped before
	for n := 0; n < budget && p.rhead < len(p.ready); n++ {
		if n >= first && p.floodStep(p.ready[p.rhead]) {
			if p.ready[p.rhead].slowSteps() && p.neighbourWaits() {
				break // the neighbour's message first (stepoff.go)
			}
			stop := p.othersWait(&clk, n)
			p.measureStep(&clk, last)
			if stop {
				// A flood's slice of steps, or a held grain's: what came
				// meanwhile goes next (slice.go) — the messages a held
				// grain's door let in among them.
				break
			}
		}
		a := p.ready[p.rhead]
		last = a
		p.ready[p.rhead] = nil
		p.rhead++
		if p.rhead == len(p.ready) {
			p.ready, p.rhead = reuse(p.ready, len(p.ready)), 0
		}
		a.setInReady(false)
		slow := a.slowSteps() // each of its steps timed (timedStep)
		var began time.Time
		if slow {
			began = time.Now()
		}
		published := slow && p.publishStep(w, a)
		if !p.advance(w, a) {
			return false // a sender may have handed it off (stepoff.go)
		}
		if published {
			p.stepOff.Store(nil)
		}
		if slow {
			p.timedStep(a, time.Since(began))
		}
		if !p.multiP {
			p.soloTurn()
		}
	}
	// Grains that re-ready themselves every round (a deep backlog) keep the
	// queue from ever emptying: slide the live part down so the consumed
	// prefix does not grow without end.
	if p.rhead > 64 && p.rhead > len(p.ready)/2 {
		n := copy(p.ready, p.ready[p.rhead:])
		clear(p.ready[n:])
		p.ready, p.rhead = p.ready[:n], 0
	}
	return true
}

// advance takes the next due step of a's lifecycle, if no turn of a runs:
// activate it, deactivate it, or run its oldest waiting message.
func (p *partition) advance(w *worker, a *act) bool {
	if a.busy() {
		return true // its finish readies it again
	}
	switch a.State() {
	case activation.Activating:
		if p.mode == modeClosing {
			p.remove(a)
			return true
		}
		if a.isStopping() {
			// Stopped before its activation turn began — a restart's fresh
			// instance readied, then a Stop read in the same round: what
			// waited for it went as dead letters (halt), and an instance
			// built now would only load its state to be deactivated
			// (TestAStopBeforeARestartsActivationTurnBuildsNoInstance).
			p.remove(a)
			return true
		}
		return p.runTurn(w, a, tkActivate, &queues.Envelope{})
	case activation.Active:
		if a.wantsDeactivate() {
			return p.beginDeactivate(w, a)
		}
		env, ok := p.mbPop(a)
		if !ok {
			return true
		}
		for p.staleTick(a, &env) { // its timer ended while it waited: dropped
			if env, ok = p.mbPop(a); !ok {
				p.floodOver(a) // the last message, as below
				break
			}
		}
		if a.isOverfull() && a.Mailbox.Len() < a.k.maxBacklog {
			p.setOverfull(a, false)
		}
		if !ok {
			return true
		}
		if a.Mailbox.Len() > 0 {
			p.makeReady(a) // one turn a step, so every ready grain gets its turns
			return p.runTurn(w, a, tkMessage, &env)
		}
		p.floodOver(a)
		return p.runTurn(w, a, tkMessage, &env)
	case activation.Backoff:
		if a.wantsDeactivate() { // shutdown or eviction while backing off: no instance to deactivate
			_ = a.Transition(activation.Deactivating)
			p.remove(a)
		}
	}
	return true
}

// interleave runs a turn of a busy grain on a goroutine of its own: a call
// re-entering a grain that waits in the chain, or a message to a reentrant
// grain that waits in a call. The turn token keeps the two turns' code from
// running at the same time.
func (p *partition) interleave(a *act, env queues.Envelope) { p.interleaveAs(a, env, false) }

// interleaveAs is interleave; holds, that the turn holds a's other
// messages (holding.go). It reports whether the turn was launched: not for
// an ask whose caller has gone, or a tick whose timer has.
func (p *partition) interleaveAs(a *act, env queues.Envelope, holds bool) bool {
	if p.dropExpired(&env) || p.staleTick(a, &env) {
		return false
	}
	// A stateless activation that lets an ask in (a call back on its
	// waiting turn's chain) runs it here: a deadlock walk finds its turn by
	// that, as it does a queued one's (takenAt). Not recorded, the ask's
	// activation was not known, and a walk took it for one that would be
	// answered: a tangle through it waited for its deadline (the chaos
	// program, about one run in seventy of its defaults).
	p.takenAt(a, &env)
	a.Turns++
	p.inflight++
	if a.isWorker() {
		p.swBusy.Add(1)
		p.offPartition(a, 1) // out again in opTurnDone
	}
	w := newWorker(p, true)
	if holds {
		a.beginHolding()
		w.holdsNext = true
	}
	if env.Request != nil {
		p.orphans[env.Request] = struct{}{}
		notePeak(&p.orphanPeak, len(p.orphans))
	}
	claim := a.extra().token.reserve() // in arrival order, before the goroutine starts
	p.s.turnBegun()
	p.s.runners.launch(taskFunc(func() {
		defer p.s.turnEnded()
		<-claim
		c := ctl{op: opTurnDone, a: a}
		exited := true
		defer func() {
			if exited { // the handler, or the Decider, called runtime.Goexit (see goexit.go)
				p.goexitedOutcome(w, a, &c.res, func() { p.q.PushControl(c) })
				p.q.PushControl(c)
			}
		}()
		w.label(a.k) // a runner may come from a turn of another kind
		// The turn, and its Decider if it fails (execute: decideInTurn).
		p.execute(w, a, tkMessage, &env, true, &c.res)
		exited = false
		p.q.PushControl(c)
	}))
	return true
}

// flushMailbox runs the messages waiting in the mailbox of a grain that
// lets them in (all of a reentrant kind's; those its WithMayInterleave
// predicate took), as interleaved turns, in order, if its turns wait in
// calls; the others stay, in their order. They went to the mailbox because
// no turn waited when they came (one ran, or OnActivate did); left there
// once every turn waits, they would wait for turns that may be waiting for
// them. Called when a message comes (ahead of it), when a turn of the grain
// begins waiting (opWaiting), and when an interleaved turn ends (room for
// one more).
func (p *partition) flushMailbox(a *act) {
	if a.Mailbox.Len() == 0 || !p.open(a) {
		return
	}
	if a.k.reentrant {
		for a.Mailbox.Len() > 0 && p.interleaveRoom(a) {
			env, _ := p.mbPop(a)
			p.interleave(a, env)
		}
	} else if x, hold := a.extra(), p.mayHold(a); x.mayIn > 0 && p.interleaveRoom(a) || hold {
		// Once round the mailbox: what goes in leaves it, the rest is put
		// back behind — all of it, room or not, which keeps its order. With
		// no turn holding the grain, the first message the predicate does
		// not take goes in too, and holds it (holding.go).
		for n := a.Mailbox.Len(); n > 0; n-- {
			env, _ := p.mbPop(a)
			switch taken := env.Meta != nil && env.Meta.MayInterleave; {
			case taken && p.interleaveRoom(a):
				p.interleave(a, env)
			case !taken && hold: // past the bound, if need be (mayHold)
				hold = !p.interleaveHolding(a, env) // the next, if this one was dropped
			default:
				p.mbPush(a, env)
			}
		}
	}
	if x := a.x.Load(); x != nil && x.turnAsks > 0 {
		// Past the bound, the asks from turns go in all the same
		// (turnsAsk): they came while no turn waited, and wait behind
		// the bound for turns that may wait for their callers. Each takes
		// along what may go in ahead of it (letInAhead), up to the last.
		// (Counted only where they may go in, so a mailbox is looked
		// through only when one does.)
		p.letInAhead(a, int(x.turnAsks))
	}
	if a.isOverfull() && a.Mailbox.Len() < a.k.maxBacklog {
		p.setOverfull(a, false)
	}
}

// letInAhead lets in, as interleaved turns, what may go in from a's
// mailbox up to the asks-th ask from a turn (turnsAsk) in it — with asks
// the mailbox's length, all that may go in. The rest stays, in its order.
// A turn's ask goes in past the bound, and what waits ahead of it goes
// first: alone, it overtook its sender's earlier messages (a grain's two
// tells and then its ask to a reentrant grain at its bound were handled
// ask first: TestATurnsAskPastTheBoundKeepsItsSendersOrder). The bound is
// passed by at most a backlog's worth.
func (p *partition) letInAhead(a *act, asks int) {
	// Once round the mailbox, whatever stays put back behind — all of it,
	// which keeps its order.
	for n := a.Mailbox.Len(); n > 0; n-- {
		env, _ := p.mbPop(a)
		if asks > 0 && (a.k.reentrant || env.Meta != nil && env.Meta.MayInterleave) {
			if turnsAsk(&env) {
				asks--
			}
			p.interleave(a, env)
		} else {
			p.mbPush(a, env)
		}
	}
}

// interleaveRoom reports whether a may take one more interleaved turn. Each
// waits for the turn token on a goroutine of its own, so their number is
// bounded by the kind's backlog limit, as the mailbox is: past it, messages
// wait in the mailbox under its overflow policy, and go in as turns end
// (finish calls flushMailbox) — but an ask from a grain's turn (turnsAsk).
func (p *partition) interleaveRoom(a *act) bool { return int(a.Turns) <= a.k.maxBacklog }

// turnsAsk reports whether env is an ask from a grain's turn, which goes
// into an interleaving grain that lets it in whatever its bound: its
// caller waits for it, and the grain's waiting turns may wait for its
// caller — a deadlock across chains that the walk does not see, since such
// a grain lets in what comes, as far as it knows: queued behind the bound,
// such asks waited for their deadline (bench/chaos -backlog 4 with a
// reentrant kind; TestATurnsAskPassesAReentrantGrainsBound). They are as
// many as the turns that wait for them, so the bound still holds what
// floods a grain: tells, and asks from outside.
func turnsAsk(env *queues.Envelope) bool { return env.Request != nil && env.Meta != nil }

// callsBackWaitingTurn reports whether env is a call back into a, on the
// call chain of a turn of a's that waits for it, and allowed to re-enter
// (call-chain reentrancy, or a reentrant kind). Not into a stateless
// activation whose OnActivate runs: the chain names the identity, not
// the activation, and the one waiting on it may be another — this one,
// still loading, let a call back in on its first activation's chain (the
// several-clients model test, with a reentrant stateless worker). Queued,
// the call goes to another activation if one is free (forwardWorker), or
// waits for this one's OnActivate; a cycle through the hook is an edge of
// the deadlock walk.
func (p *partition) callsBackWaitingTurn(a *act, env *queues.Envelope) bool {
	return env.Request != nil && env.Request.Interleave && a.waiting() > 0 && a.State() <= activation.Active &&
		!(a.isWorker() && a.activatingNow())
}
