package silo

import (
	"runtime"
	"time"

	"github.com/granary-go/granary/queues"
)

// Stepping off a flood's slow turn for its neighbours.
//
// A grain sent a flood shares its partition a slice at a time (slice.go):
// its neighbours' messages wait for the turn under way and then for the
// flood's share of steps, 200 µs at least. With turns of some work — the
// bench's `flood`, 200 µs of CPU each — a neighbour's ask waited 0.33 ms
// at the median and 0.5–0.6 ms at the 99th percentile, while the other
// core stood idle; protoactor, a goroutine an actor, answered in 8 µs.
// Orleans runs each activation's turns as work items of a thread pool, so
// a flooded grain there holds one thread, not its neighbours.
//
// So, with more than one P, the owner publishes each step of a grain whose
// flood steps it measured slow (stepOffMin or more each: a consecutive
// pair of othersWait's clock readings, which it takes at each step of such
// a flood anyway): which worker runs it, and the word the step's turn will
// have. A sender whose message for another grain of the partition lands
// in the queue meanwhile hands the partition off from that turn — the
// same handoff as a turn that calls out, by the same compare-and-swap
// (worker.detachAt): the flood's turn finishes on its goroutine, off the
// partition, while a new owner, on a free core, takes the message at once.
// The turn's outcome comes back as any handed-off turn's does, and the
// grain steps on. One sender a step hands off (it takes the publication
// with a compare-and-swap); the flood's own senders never do.
//
// The grain counts as served while its stepped-off turn runs — its full
// backlog holds its senders at its door, as before the handoff — by the
// grace a turn taken by the handoff monitor has (holdgrace.go): the turn
// is not blocked, only elsewhere. Each grain has a grace of its own, so
// two floods' steps are stepped off alike; and the new owner takes the
// messages that came before the round's other steps (takeSteppedFor).
//
// Not on one P, where a new owner would only wait for the flood's
// goroutine to give the core up; nor while the scheduler is crowded
// (watchdog.go), where it would wait for a core behind the crowd; nor for
// cheap steps, where the handoff would cost more than the step.

// stepOffMin is how long a flood's steps must take for a neighbour's
// message to hand the partition off from them: a handoff costs a few
// microseconds of the sender's and the new owner's, a twentieth of a
// step at least.
const stepOffMin = 50 * time.Microsecond

// publishStep tells senders that w is about to run a step of a, whose
// steps are marked slow (runReady tests before it calls), if the step is
// a flood's and may be stepped off (see above), and reports whether it
// did.
func (p *partition) publishStep(w *worker, a *act) bool {
	if !p.multiP || p.s.dog.crowded.Load() {
		return false
	}
	if !p.floodStep(a) {
		return false // not a flood's step (runReady)
	}
	p.stepHash.Store(a.ID.HashWithKind(a.k.nameHash))
	p.stepWord.Store((w.seq+1)<<2 | wRunning) // the word begin gives the step's turn
	p.stepOff.Store(w)
	return true
}

// measureStep records what othersWait measured of the step before the one
// it just read the clock for, last (nil if unknown): a slow step of a
// flood marks its grain's steps slow (and the grain the partition's
// flooder). What clears the mark is the grain's own steps, each timed
// once it is marked (timedStep).
func (p *partition) measureStep(c *stepClock, last *act) {
	if c.took >= stepOffMin && last != nil {
		p.slowFlood(last)
	}
}

// slowFlood records a flood of slow turns of a: its steps are marked slow,
// and it is the partition's flooder.
func (p *partition) slowFlood(a *act) {
	a.extra().slowSteps = 1
	p.flooder = a
	p.flooding.Store(a.ID.HashWithKind(a.k.nameHash))
}

// slowSteps reports whether a's flood steps were last measured slow: the
// owner publishes them, to be stepped off (publishStep). A mark of each
// grain's, not one grain of the partition's: two grains flooded at once
// step in turn, each measured after the other, and a neighbour's ask
// waited for whole turns of both (0.33 ms at the median with turns of
// 200 µs, against 5 µs beside one flood).
func (a *act) slowSteps() bool {
	x := a.x.Load()
	return x != nil && x.slowSteps != 0
}

// clearSlowSteps removes a's mark of slow steps, if it has one, and with
// it the partition's record of a's flood for senders (flooding): a grain
// once taken for a slow flood — a timed turn stretched by a preemption,
// say — whose steps are quick is stepped by the share again, not ended by
// every neighbour's message (neighbourCame), where a hot grain of a busy
// partition would fall behind.
func (p *partition) clearSlowSteps(a *act) {
	x := a.x.Load()
	if x == nil || x.slowSteps == 0 {
		return
	}
	x.slowSteps = 0
	if h := p.flooding.Load(); h != 0 && h == a.ID.HashWithKind(a.k.nameHash) {
		p.flooding.Store(0)
	}
}

// timedStep records how long a step of a took, a grain marked slow: a slow
// step keeps the mark, and quickToClear quick ones in a row clear it.
// runReady times every step of a grain marked slow, its first of a round
// too: while a neighbour's message waits such a grain takes one step a
// round, and two steps read back to back (measureStep, which cleared the
// mark at one quick step then) never came. A grain marked by a step or two
// stretched once — its owner preempted on a crowded machine — then kept
// the mark for good, one step a round, and fell behind for as long as its
// partition was sent messages: the example game's lobby at 5,000 bots
// (TestABackloggedGrainOnceSlowKeepsPaceBesideOutsideSenders). Several
// quick steps, not one: a slow flood's turn that happens to be quick
// would otherwise let its next steps take the share while a neighbour
// waits (TestANeighboursMessageEndsAFloodsSteps).
func (p *partition) timedStep(a *act, took time.Duration) {
	x := a.x.Load()
	if x == nil || x.slowSteps == 0 {
		return
	}
	if took >= stepOffMin {
		x.slowSteps = 1
		return
	}
	if x.slowSteps++; x.slowSteps > quickToClear {
		p.clearSlowSteps(a)
	}
}

// quickToClear is how many quick steps in a row clear a grain's mark of
// slow steps (timedStep).
const quickToClear = 4

// floodOver records that a's flood is over — its last message stepped, or
// the grain gone: it is not the partition's flooder any more (a stale
// flooder would keep soloTurn's yields short), nor are its steps marked
// slow.
func (p *partition) floodOver(a *act) {
	if a == p.flooder {
		p.flooder = nil
	}
	p.clearSlowSteps(a)
}

// stepAside hands the partition off from the flood step published as w's,
// for a message just pushed, unless the message is for the flood's grain
// (hash) or comes from a turn of this partition. Safe for concurrent use.
func (p *partition) stepAside(w *worker, env *queues.Envelope, ti *turnInfo) {
	if env.Hash == p.stepHash.Load() || ti != nil && ti.w.p == p {
		return
	}
	// Counted in stepBusy before it takes the publication, a sender keeps
	// the partition's owners from leaving until it is done (quitOwner):
	// detachAt counts a turn in the silo's turns group before its CAS,
	// which must not happen once Close has waited for the owners.
	p.stepBusy.Add(1)
	defer p.stepBusy.Add(-1)
	x := p.stepWord.Load()
	if !p.stepOff.CompareAndSwap(w, nil) {
		return // another sender took it, or the step is over
	}
	w.stepped.Store(true) // before the handoff: the new owner reads it (graceFrom)
	if !w.detachAt(x, false) {
		w.stepped.Store(false) // the step is over: nothing handed off
		return
	}
	p.stepOffs.Add(1)
}

// neighbourCame records, for the owner, that a message for a grain other
// than the flooded one (flooding) was just pushed while no step of the
// flood was published: a sender's step-off covers only a push made during
// one (stepAside), and a message that came while the round delivered —
// the flood's own messages, thousands, going to its mailbox — waited in
// the queue for the flood's share of steps after them, as long as those
// deliveries took (a neighbour's ask sent as a flood of 10,000 turns of
// 200 µs began: 1–6 ms). The owner ends the flood's steps at the next
// (runReady), reads the queue and runs the message: a slow flood gets a
// step a round while its neighbours are sent messages, as Orleans'
// scheduler gives each activation a turn in its order. Only
// while the flood's steps are marked slow: a quick flood's, or a hot
// grain's, still run their share, as long as the deliveries took, or a
// hot grain of a busy partition would fall behind (slice.go). Not for a
// turn of this partition, whose message the owner sees next anyway. Safe
// for concurrent use.
func (p *partition) neighbourCame(ti *turnInfo) {
	if ti != nil && ti.w.p == p || p.othersCame.Load() {
		return
	}
	p.othersCame.Store(true)
}

// neighbourWaits reports, and forgets, whether a neighbour's message came
// while the flood's steps were not published (neighbourCame) and may
// still wait in the queue.
func (p *partition) neighbourWaits() bool {
	if !p.othersCame.Load() {
		return false
	}
	p.othersCame.Store(false)
	return p.q.Len() > 0
}

// takeSteppedFor has a new owner that a sender stepped off a flood's step
// take the messages that came — the sender's among them — before the
// round's other steps: another flood's steps would otherwise go first,
// each as slow, and the handoff would only have moved the wait (two
// floods at once: a neighbour's ask 0.33 → 0.60 ms at the median). A
// step is published only after the round's deliveries (runReady), so the
// batch is done; the control items taken with it too.
func (p *partition) takeSteppedFor() {
	if !p.batch.Empty() || p.cpos < len(p.ctls) {
		return
	}
	p.ctls = p.q.DrainInto(&p.batch, reuse(p.ctls, len(p.ctls)))
	p.cpos = 0
	p.steppedFor = true // its callers run before the steps (answeredYield)
}

// quitOwner ends an owner's claim on the partition once no sender is
// inside stepAside: one that took a publication before the owner cleared
// it may still count a turn (see stepAside), and the owner's leaving may
// be the last, the one Close waits for. The wait is a sender's few
// instructions, and only when one raced the end of a step.
func (p *partition) quitOwner() {
	p.stepOff.Store(nil)
	for p.stepBusy.Load() != 0 {
		runtime.Gosched()
	}
	p.s.owners.Done()
}
