package silo

import (
	"fmt"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Control messages: finished turns from other goroutines, idle ticks,
// restarts, timers, shutdown and close, and what the owner does with them.

// ctlOp is a control message for a partition's owner. Control messages take
// the queue's control lane, which is drained ahead of user messages.
type ctlOp uint8

const (
	opTurnDone     ctlOp = iota + 1 // a handed-off or interleaved turn finished
	opIdleTick                      // advance the idle wheel
	opTimer                         // the partition's timer wake-up fired (timers.go)
	opShutdown                      // drain, then deactivate everything
	opClose                         // drop everything now
	opDeactivate                    // Silo.Deactivate: deactivate a grain ahead of its queued messages
	opStop                          // Silo.Stop: stop a grain; its queued messages become dead letters
	opDeactTimeout                  // an OnDeactivate overran its timeout
	opWaiting                       // a turn of an interleaving grain began waiting in a call
	opDrain                         // Shutdown: the silo has settled; deactivate everything
	opList                          // Silo.ActiveGrains: report the directory's identities
	opIdleMore                      // the idle collection stopped short: collect the next slice
	opShedMore                      // a shed under memory pressure goes on: its next slice (memory.go)
	opShed                          // a look between idle ticks found memory short: shed a share now (memlook.go)
	opGraceOver                     // a held grain's grace may be over (holdgrace.go)
	opRewalk                        // a call of a fan-out ended: walk again from its calls left, or behind its caller (deadlock.go)
)

type ctl struct {
	op    ctlOp
	a     *act
	res   turnResult
	first queues.Envelope // opTurnDone: the first message of a failed activation; opDeactivate, opStop: the target; opRewalk: the call, or with no request, the grain of up to walk behind
	ahead int             // opStop, opShutdown: messages queued ahead of it (queues.Queue.PushControlAt); opIdleTick, opShed: the share to shed, in ppm (memory.go); opDrain: 1 if the settling's bound ended it; opRewalk: a's partition
	list  chan<- []*act   // opList: where the partition's activations go (list.go)
	calls []waitCall      // opRewalk: the calls of a's turn left to walk again from after first, then behind a, in partition ahead (deadlock.go)
	up    queues.Chain    // opRewalk: the call chain of a's turn, behind whose grains to walk after a, the nearest last
}

type mode uint8

const (
	modeRunning  mode = iota
	modeSettling      // Shutdown: finish the work under way (settle.go)
	modeDraining      // Shutdown, once settled: deactivate all
	modeClosing       // Close, or Shutdown past its deadline: dead-letter all
)

// control handles one control message.
func (p *partition) control(w *worker, c ctl) bool {
	switch c.op {
	case opTurnDone:
		if c.res.req != nil {
			delete(p.orphans, c.res.req)
		}
		if c.a.isWorker() {
			p.offPartition(c.a, -1) // counted in as it left the partition
		}
		var first *queues.Envelope
		if c.first.Msg != nil {
			first = &c.first
		}
		p.endGrace(c.a)
		p.finish(c.a, &c.res, first)
	case opGraceOver:
		p.graceOver()
	case opRewalk:
		switch {
		case c.first.Request == nil:
			p.rewalkUp(c)
		case !p.rewalk(c.first):
			p.s.rewalkNext(c)
		}
	case opIdleTick:
		p.collectIdle(c.ahead)
	case opIdleMore:
		p.idleMore = false
		p.collectExpired()
	case opShedMore:
		p.shedMore()
	case opShed:
		if p.mode == modeRunning {
			p.now = p.s.since()
			p.shed(c.ahead)
		}
	case opList:
		p.list(c.list)
	case opTimer:
		return p.fireTimers(w)
	case opShutdown:
		if p.mode == modeRunning {
			p.mode = modeSettling
			p.shutAt = stopPoint{set: true, seq: p.batch.Seq(), ahead: c.ahead}
			p.dir.All(func(_ grain.ID, a *act) bool {
				p.stopTimers(a)
				if a.State() == activation.Backoff && a.Mailbox.Len() > 0 {
					// Its queued messages are work under way: it restarts
					// now rather than at the end of its backoff (restart).
					p.rebuild(a)
				}
				return true
			})
		}
	case opDrain:
		if p.mode == modeSettling {
			if c.ahead == 1 {
				p.reportUnsettled()
			}
			p.keptBusy = nil
			p.mode = modeDraining
			p.q.Close() // the turns' calls too are refused from now on
		}
	case opClose:
		p.mode = modeClosing
		p.closeAll()
	case opDeactTimeout:
		p.deactivationOverran(c.a)
	case opWaiting:
		if cur, ok := p.dir.Get(c.a.ID, c.a.ID.Hash()); ok && cur == c.a {
			p.flushMailbox(c.a)
		}
	case opStop:
		p.stopRequested(c)
	case opDeactivate:
		a, ok := p.dir.Get(c.first.Target, c.first.Hash)
		if ok && a.State() == activation.Deactivating && p.restartHook(a) {
			// The failed instance's OnDeactivate runs before a restart:
			// the grain stays unless asked to go, as it is now — it goes
			// once the hook has ended, instead of restarting (finish).
			a.wantDeactivate(grain.DeactivationRequested)
			return true
		}
		if !ok || a.isStopping() || a.State() >= activation.Deactivating {
			return true // not active, or already on its way out
		}
		if a.k.interleaves() && a.busy() {
			// Its turns may wait in calls, and for what interleaves with
			// them: it deactivates once the last one ends, as
			// DeactivateOnIdle would (see afterMessage).
			a.extra().deactWhenIdle = true
			return true
		}
		a.wantDeactivate(grain.DeactivationRequested)
		p.makeReady(a)
	}
	return true
}

// unoccupied reports whether only time keeps a active: it is active,
// runs no turn, has nothing waiting and is not on its way out already.
// Idle collection takes such a grain at its deadline, shedding before it
// (memory.go); either leaves one kept by DelayDeactivation.
func unoccupied(a *act) bool {
	return a.State() == activation.Active && !a.busy() && a.Mailbox.Len() == 0 && !a.wantsDeactivate()
}

// collectIdle deactivates the grains whose idle deadline passed.
func (p *partition) collectIdle(shedPPM int) {
	p.now = p.s.since()
	if p.mode != modeRunning {
		// A Shutdown: it deactivates every grain its own way, but gives
		// up on an activation that hangs as a running silo does.
		if p.mode != modeClosing {
			p.checkActivations()
		}
		if len(p.actWatch) == 0 {
			p.idleQuiet.Store(true)
		}
		return
	}
	if p.rhead == len(p.ready) { // a quiet moment: let a burst's ready list go
		p.ready, p.rhead = reuse(p.ready, 0), 0
	}
	p.q.Trim()
	if !p.idleMore { // else the collection under way goes on to this now
		p.collectExpired()
	}
	if shedPPM > 0 && p.mode == modeRunning {
		p.shed(shedPPM)
	}
	for id, until := range p.quarantine {
		if until <= p.now {
			p.unquarantine(id, p.s.kinds[id.Kind()])
		}
	}
	p.quarantine = regrow(p.quarantine, &p.quarPeak)
	p.orphans = regrow(p.orphans, &p.orphanPeak)
	p.forgetActivationFailures()
	p.checkActivations()
	p.idleLen.Store(int64(p.wheel.Len()))
	p.noteIdleQuiet()
}

// collectExpired deactivates the grains whose idle deadline passed by
// p.now, idleSlice of them at most: if more are due, it queues itself an
// opIdleMore to go on after the messages that came meanwhile (one at a
// time: the idle ticks that come meanwhile leave the collection to it).
// A million grains idle at once — a burst of sessions, all ended — would
// otherwise hold the partition's other grains for the whole of it: a live
// grain's ask waited 0.25 s for a million grains on two partitions
// (TestAMassDeactivationHoldsUpNoLiveGrain). runReady takes the
// deactivations themselves in slices too.
func (p *partition) collectExpired() {
	exp, more := p.wheel.AdvanceAtMost(p.now, idleSlice, p.expired[:0])
	for _, e := range exp {
		a := actOf(e)
		switch {
		case !unoccupied(a):
			p.touch(a)
		case a.keepUntil() > p.now:
			p.wheel.Touch(&a.idle, a.keepUntil())
		default:
			a.wantDeactivate(grain.DeactivationIdle)
			p.makeReady(a)
		}
	}
	clear(exp)
	p.expired = reuse(exp, len(exp))
	if more {
		p.idleMore = true
		p.q.PushControl(ctl{op: opIdleMore})
	}
}

// idleSlice is how many expired grains collectExpired takes at a time: a
// few hundred microseconds' work, each a cache miss or two.
const idleSlice = 256

// stopped advances a shutdown or close, and reports whether the partition
// has finished: nothing queued, nothing active, no turn running.
func (p *partition) stopped() bool {
	if p.mode == modeSettling {
		p.settle()
		return false
	}
	if p.q.Len() > 0 {
		return false
	}
	// Draining: every grain that is idle now is asked to deactivate — once
	// the ready list has gone through those asked before: a round steps a
	// slice of it (runReady), and a pass over the directory at each round
	// made a shutdown of a million grains take 29 s instead of 0.4.
	if p.mode == modeDraining && p.rhead == len(p.ready) {
		p.dir.All(func(_ grain.ID, a *act) bool {
			if !a.busy() && a.Mailbox.Len() == 0 && !a.isReady() {
				switch a.State() {
				case activation.Active, activation.Backoff:
					a.wantDeactivate(grain.DeactivationShutdown)
					p.makeReady(a)
				}
			}
			return true
		})
	}
	if p.dir.Len() > 0 || p.rhead < len(p.ready) {
		return false
	}
	// Draining waits for every turn; closing does not wait for turns that
	// run off the partition (their asks were answered by closeAll) — but
	// for the first messages that failed activations hand back, which no
	// user code holds up any more (closeActivations).
	if p.mode == modeDraining && p.waitedFor() > 0 || p.firstsOut.Load() > 0 {
		return false
	}
	p.stopGrace()
	p.stopWake()
	p.openAllDoors()
	close(p.done)
	return true
}

// dropLeftovers lets go of what came for the partition after it stopped,
// and makes what comes later go nowhere: the ends of the turns a Close did
// not wait for (opTurnDone: their asks were answered as it closed,
// closeAll), a Deactivate or a Stop that passed the silo's state as it
// stopped — no one reads them now, and a stopped silo's queues held them,
// and Stats counted them, for as long as the silo lived. A message cannot
// be among them (a stopped partition's queue takes none), but one would be
// a dead letter, not lost. Called once the owners have stopped.
func (p *partition) dropLeftovers() {
	clear(p.ctls)
	p.ctls, p.cpos = nil, 0
	clear(p.q.Discard(&p.batch)) // and what comes later goes nowhere
	for {
		env, ok := p.batch.Pop()
		if !ok {
			return
		}
		if !ranAhead(&env) {
			p.s.deadLetter(env, grain.ReasonShutdown, nil)
		}
	}
}

// closeAll dead-letters everything the partition holds — the first message
// of an activation still running off it included (closeActivations) —,
// forgets every activation, and answers the asks still being handled off
// the partition with ErrSiloClosed: their callers must not wait on handlers
// that may ignore their cancelled ctx. (Those turns were handled, so they
// are not dead letters; their own later replies are dropped.)
func (p *partition) closeAll() {
	p.closeActivations()
	for {
		env, ok := p.batch.Pop()
		if !ok {
			break
		}
		if ranAhead(&env) {
			continue
		}
		p.s.deadLetter(env, grain.ReasonShutdown, nil)
	}
	var all []*act
	p.dir.All(func(_ grain.ID, a *act) bool { all = append(all, a); return true })
	for _, a := range all {
		p.stopTimers(a)
		if x := a.x.Load(); x != nil && x.deact != nil && x.deact.timer != nil {
			// An OnDeactivate under way: no give-up is needed once the
			// grain is gone, and its timer would keep the silo until it
			// fired (TestCloseDuringOnDeactivateLeavesNoTimerSet).
			x.deact.timer.Stop()
			x.deact.timer = nil
		}
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonShutdown, nil) })
		a.setDeactWant(false)
		p.remove(a) // a turn still running finds its activation gone (finish)
	}
	for req := range p.orphans {
		req.Resolve(nil, errClosedMidTurn)
	}
	clear(p.orphans)
}

var errClosedMidTurn = fmt.Errorf("%w: the silo closed while the grain handled the call", grain.ErrSiloClosed)

// Mailbox changes go through these, to keep the backlog gauge exact.
