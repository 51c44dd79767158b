package silo

import (
	"container/heap"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/queues"
)

// grainTimer is one running timer of an activation. Owner state.
//
// A partition keeps its grains' timers in one heap, earliest due first, and
// one clock timer armed for the earliest (partitionTimers): a clock timer
// for each grain timer held a runtime timer and a closure for as long as it
// ran, and made a fresh pair every period (docs/performance-log.md, item 34).
type grainTimer struct {
	a      *act
	period time.Duration
	due    time.Duration // on the silo clock (Silo.since): its place in the heap
	// later, if not 0, is when the timer is due in fact: restarted since it
	// took its place, later than that (restartTimer). It is moved there when
	// its place comes up.
	later time.Duration
	index int32 // in partitionTimers.heap; -1 while not scheduled (its tick queued or running)
	slot  int32 // in actExtra.timers
	// backoff: not a grain timer but the end of a restart's backoff
	// (partition.backOff): due, it restarts a rather than tick.
	backoff bool
	msg     any
	tick    queues.Tick
	meta    queues.Meta // the envelope metadata of every tick
}

// partitionTimers is a partition's grain timers, and the one clock timer
// that wakes its owner for the earliest. Owner state.
type partitionTimers struct {
	heap  timerHeap
	wake  clock.Timer // armed for at (or fired, its opTimer on the way)
	at    time.Duration
	armed bool
	fire  func() // wake's function: pushes an opTimer, made once
	seq   uint64
	more  bool            // fireTimers stopped short: its opTimer goes on
	env   queues.Envelope // the envelope of the tick being delivered (fire)
	// queued: an opTimer is in the partition's queue, not yet taken by
	// fireTimers. Set by whoever queues one (the wake, on a goroutine of
	// the clock's; the owner), so that at most one ever is (queueTimer).
	queued atomic.Bool
}

// queueTimer queues an opTimer unless one is queued already: the one
// queued fires everything due when its turn comes, so a second has
// nothing to add. Two sources queue them — the clock wake, and a run of
// slices going on (fireTimers) — and a tick of a slice re-arms the wake
// for its timer's next tick; with timers due again at once, each slice
// queued two for the one it took, and a thousand grains' timers of a
// nanosecond flooded the control lane: asks to the partition waited
// seconds behind it (TestTimersAlwaysDueStarveNothing/timers=1000).
// Safe for concurrent use.
func (p *partition) queueTimer() {
	if p.timers.queued.CompareAndSwap(false, true) {
		p.q.PushControl(ctl{op: opTimer})
	}
}

// applyTimers carries out the timer starts and stops a turn asked for.
func (p *partition) applyTimers(a *act, ops []timerOp) {
	if len(ops) == 0 {
		return
	}
	x := a.extra()
	running := a.State() == activation.Active && p.mode == modeRunning
	restarted := false
	for _, op := range ops {
		old := x.timer(op.name)
		if old != nil && old.index >= 0 && !op.stop && running {
			p.restartTimer(old, op)
			restarted = true
			continue
		}
		if old != nil {
			p.unschedule(old)
			x.dropTimer(old)
		}
		if op.stop || !running {
			continue
		}
		p.timers.seq++
		gt := &grainTimer{a: a, period: op.period, msg: op.msg, index: -1,
			tick: queues.Tick{Name: op.name, Seq: p.timers.seq}}
		gt.meta = queues.Meta{Tick: &gt.tick, MayInterleave: op.letIn}
		x.addTimer(gt)
		p.schedule(gt, op.due)
	}
	p.armTimers()
	if restarted {
		x.reuseOps(ops)
	}
}

// reuseOps gives ops, applied, back to x for the next turn's timer requests:
// a grain that restarts a timer at every message then allocates no list
// for it each time. Only such a grain keeps one (applyTimers): one that
// started its timers once would hold the list for nothing, idle (64 bytes
// for one timer). A long list is let go too (a turn that started hundreds
// of timers at once would otherwise keep it for good), and so is one
// whose place a turn interleaving with this one filled meanwhile.
func (x *actExtra) reuseOps(ops []timerOp) {
	if cap(ops) > 8 {
		return
	}
	clear(ops) // their messages: the list must keep none alive
	x.mu.Lock()
	if x.timerOps == nil {
		x.timerOps = ops[:0]
	}
	x.mu.Unlock()
}

// restartTimer starts gt again as op says: a timer started under the name of
// one that waits in the heap — no tick of it queued or running, which
// would be the old timer's — is the same timer, due anew, with op's period
// and message, and a new sequence number (its ticks' identity). A program
// that puts a timer off at every message (a write-behind save, a debounce,
// Akka's startSingleTimer) then allocates nothing and, most often, does not
// touch the heap: due later than its place in the heap, the timer keeps
// the place and is moved when it comes up (fireTimers), once, whatever
// the number of restarts meanwhile. A new grainTimer in place of the old
// cost a restart two sifts through the heap, each comparison a likely
// cache miss, and an allocation: 400–550 ns and 220 bytes a message with
// 10,000 such grains. The caller arms the wake.
func (p *partition) restartTimer(gt *grainTimer, op timerOp) {
	p.timers.seq++
	gt.period, gt.msg, gt.tick.Seq = op.period, op.msg, p.timers.seq
	gt.meta.MayInterleave = op.letIn
	switch due := p.s.since() + min(op.due, maxSpan); {
	case due > gt.due:
		gt.later = due
	case due < gt.due:
		gt.due, gt.later = due, 0
		heap.Fix(&p.timers.heap, int(gt.index))
	default:
		gt.later = 0
	}
}

// schedule puts gt in the heap, due d from now; the caller arms the wake.
// A d past maxSpan means the same as maxSpan (never, in practice): added
// whole, it could wrap into the past.
func (p *partition) schedule(gt *grainTimer, d time.Duration) {
	gt.due = p.s.since() + min(d, maxSpan)
	heap.Push(&p.timers.heap, gt)
}

// unschedule takes gt out of the heap, if it is there.
func (p *partition) unschedule(gt *grainTimer) {
	if gt.index >= 0 {
		heap.Remove(&p.timers.heap, int(gt.index))
	}
}

// armTimers makes sure the wake fires by the earliest timer's due time, and
// not at all when there is none.
func (p *partition) armTimers() {
	t := &p.timers
	if len(t.heap) == 0 {
		// Stopped armed or not: a wake armed for a later due may still be
		// set when a slice's opTimer stood for it (fireTimers).
		if t.wake != nil {
			t.wake.Stop()
		}
		t.armed = false
		return
	}
	due := t.heap[0].due
	if t.armed && t.at <= due {
		return // it fires in time; then the owner looks again (fireTimers)
	}
	d := due - p.s.since()
	if r, ok := t.wake.(interface{ Reset(time.Duration) bool }); ok {
		r.Reset(d) // the real clock's: no allocation
	} else {
		if t.wake != nil {
			t.wake.Stop()
		}
		if t.fire == nil {
			t.fire = p.queueTimer
		}
		t.wake = p.s.after(d, t.fire)
	}
	t.at, t.armed = due, true
}

// stopWake stops the partition's clock timers as the partition stops: no
// tick is due any more — the grains are gone — and a wake left armed for a
// timer an hour off would keep the silo from the garbage collector for the
// hour, then queue an opTimer for an owner that has stopped.
func (p *partition) stopWake() {
	for _, gt := range p.backoffs { // a restart's, for a grain that is gone
		p.unschedule(gt)
	}
	p.backoffs = nil
	if t := &p.timers; t.wake != nil {
		t.wake.Stop()
	}
	p.timers.armed = false
}

// fireTimers delivers the tick of every timer now due, in due order, each
// behind whatever waits for its grain — timerSlice of them at a time: if
// more are due, it queues itself an opTimer to go on after the messages
// that came meanwhile, as idle collection does (collectExpired). A hundred
// thousand grains whose timers were started together tick together, and
// held the partition's other grains for the whole burst (a live grain's
// ask waited 88 ms for 200,000 ticks of nothing; with 2 µs of work a tick,
// 131 ms for 100,000: TestABurstOfTicksHoldsUpNoLiveGrain). The queued
// opTimer stands for the wake, armed for now, and no more than one is ever
// queued (queueTimer): twice, opTimers fed themselves — one pushed before
// each tick, then a slice's and the wake its ticks re-armed — two queued
// for each one fired, until the control items flooded the partition
// (TestTimersAlwaysDueStarveNothing).
//
// It reports false when w no longer owns the partition (a tick's turn
// blocked): the timers still due are then the next owner's, which takes
// them as it takes the partition over (takeTimers) — rather than being
// told once the blocked turn is over, which held every timer of the
// partition until it was (TestATickThatBlocksHoldsUpNoOtherTimer).
func (p *partition) fireTimers(w *worker) bool {
	t := &p.timers
	t.queued.Store(false)          // taken: a wake or a slice from now on queues the next
	t.armed, t.more = false, false // this is its firing (or a stale one: the wake is armed again below)
	now := p.s.since()
	for fired := 0; len(t.heap) > 0 && t.heap[0].due <= now; {
		if fired == timerSlice {
			t.armed, t.at, t.more = true, now, true // the opTimer is the wake
			p.queueTimer()
			return true
		}
		if gt := t.heap[0]; gt.later != 0 {
			// Restarted since it took its place: it moves to its due time
			// (counted in the slice, as a tick: each is a sift).
			gt.due, gt.later = gt.later, 0
			heap.Fix(&t.heap, 0)
			fired++
			continue
		}
		gt := heap.Pop(&t.heap).(*grainTimer)
		if len(t.heap) == 0 || t.heap[0].due > now {
			p.armTimers() // before the turn: the partition may not be this goroutine's after it
		}
		if gt.backoff {
			p.backoffOver(gt) // not counted: see timerSlice
			continue
		}
		fired++
		if !p.fire(w, gt) {
			return false
		}
	}
	p.armTimers()
	return true
}

// timerSlice is how many ticks fireTimers delivers at a time. The backoffs
// that end meanwhile are not counted: each readies its grain (a map delete
// and a lookup), and the activation's turn is a step of the ready list,
// sliced there. A restart is work under way, its messages waiting in its
// mailbox, and goes ahead of new messages as the control items it once was
// did; counted as ticks, even at an eighth of one, a crowd of grains
// restarting got a few thousand restarts a round while the partition took
// its full batch of new messages, and each grain's restarts spread out so
// far behind the others' that a grain failing at every message escaped its
// restart limit (200,000 grains told five poison messages each: 790,000–
// 930,000 restarts and 34,000–115,000 stops, against 600,000 and 200,000).
const timerSlice = 256

// takeTimers readies the timers of a partition just taken over: a tick's
// turn that blocked, handed off, may have left timers due, with the clock
// timer not armed for them or for later ones (fireTimers arms it only
// before the last tick due). Those due are fired by an opTimer — at once,
// whatever the clock, where a clock timer armed for a time past would
// fire on a test's manual clock only when it next moves — and the clock
// timer is armed for the rest.
func (p *partition) takeTimers() {
	t := &p.timers
	if len(t.heap) > 0 && t.heap[0].due <= p.now { // p.now: read as the owner began (partition.run)
		p.queueTimer()
		return
	}
	p.armTimers()
}

// fire delivers a timer's tick as a message to its grain, behind whatever
// waits for the grain. A grain on its way out takes no more ticks.
//
// The tick's envelope is the partition's own (partitionTimers.env), filled
// anew for each: enqueue copies an envelope it keeps (the mailbox, a dead
// letter, a turn let in beside one that waits) and a turn reads its own
// only until it begins (runTurn, w.begin) — before it can be handed off and
// a new owner fire the next tick. A fresh one each was the one allocation
// of a tick (96 bytes: 200,000 grains ticking once a second made 19 MB a
// second of garbage, a GC every few seconds, and ticks 15–37 ms late at
// p99 through it against 2 ms without).
func (p *partition) fire(w *worker, gt *grainTimer) bool {
	a := gt.a
	h := a.ID.Hash()
	if cur, ok := p.dir.Get(a.ID, h); !ok || cur != a {
		return true
	}
	if a.State() != activation.Active || a.wantsDeactivate() || a.isStopping() || p.mode != modeRunning {
		return true
	}
	env := &p.timers.env
	*env = queues.Envelope{Target: a.ID, Hash: h, Msg: gt.msg, Meta: &gt.meta}
	if !p.enqueue(w, a, env) {
		return false // the partition is another goroutine's now, env with it
	}
	*env = queues.Envelope{} // its message and timer: held no longer than the tick
	return true
}

// staleTick reports whether env is a tick of a timer that is no longer
// a's running timer of its name — stopped, replaced by a start under the
// name, or ended with the instance that started it (a restart; a
// shutdown's settling) — since the tick was queued. Such a tick is
// dropped where it leaves the mailbox, as Akka drops a cancelled timer's
// message already enqueued: after the turn that stops a timer, or starts
// another under its name, no tick of it reaches the grain, and a fresh
// instance gets none of the timers it never started. A tick delivered
// as it fires to an idle grain (fire) is current by then; this looks at
// those that waited, and at those let in beside a turn that waits.
func (p *partition) staleTick(a *act, env *queues.Envelope) bool {
	tick := env.Tick()
	if tick == nil {
		return false
	}
	x := a.x.Load()
	if x == nil {
		return true
	}
	if gt := x.timer(tick.Name); gt == nil || &gt.tick != tick {
		return true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tickEnded(tick)
}

// tickEnded reports whether a turn has stopped or replaced tick's timer
// since the owner last found the tick live: a turn under way — waiting in
// a call, while ticks interleave — may have asked to, and the request is
// carried out as the turn ends, but it ended the timer for its ticks
// already; or the owner has taken such a request of a turn that ended
// while the tick, let in beside a waiting turn, waited for the grain's
// turn token (endTicksOnTheirWay). x.mu held.
func (x *actExtra) tickEnded(tick *queues.Tick) bool {
	if tick.Ended {
		return true
	}
	for i := range x.timerOps {
		if x.timerOps[i].name == tick.Name {
			return true
		}
	}
	return false
}

// tickOver is tickEnded, taking x.mu: an interleaved tick's turn asks it
// once it has the grain's turn token.
func (x *actExtra) tickOver(tick *queues.Tick) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tickEnded(tick)
}

// endTicksOnTheirWay marks ended the ticks of the timers ops stop or
// replace that are on their way to the grain — let in beside a turn that
// waits in a call, the tick waiting for the grain's turn token (index -1:
// fired, not scheduled again) — as the owner takes ops from the turn that
// asked (act.takeRequests): the tick, once it has the token, looks again
// (partition.execute), and the requests are no longer there to see. In
// the same hold of x.mu, so that it sees one or the other. Without it, a
// turn let in that stopped the timer was followed by the tick waiting
// behind it (TestATickLetInBehindATurnThatEndsItsTimerIsNotDelivered).
// Owner only, x.mu held.
func (x *actExtra) endTicksOnTheirWay(ops []timerOp) {
	for i := range ops {
		if gt := x.timer(ops[i].name); gt != nil && gt.index < 0 {
			gt.tick.Ended = true
		}
	}
}

// tickDone schedules a repeating timer's next tick once the tick's turn has
// finished, so ticks never pile up behind a slow grain (the period counts
// from the end of a tick, as in Orleans).
func (p *partition) tickDone(a *act, tick *queues.Tick) {
	x := a.extra()
	gt := x.timer(tick.Name)
	if gt == nil || &gt.tick != tick {
		return
	}
	if gt.period <= 0 || a.State() != activation.Active || p.mode != modeRunning {
		x.dropTimer(gt)
		return
	}
	p.schedule(gt, gt.period)
	p.armTimers()
}

// stopTimers stops every timer of a.
func (p *partition) stopTimers(a *act) {
	x := a.x.Load()
	if x == nil || len(x.timers) == 0 {
		return
	}
	for _, gt := range x.timers {
		p.unschedule(gt)
	}
	x.timers, x.timerIndex = nil, nil
	p.armTimers()
}

// manyTimers is how many timers a grain keeps in a list searched in order
// (most have one or two) before it indexes them by name as well.
const manyTimers = 8

// timer returns the running timer of x called name, or nil.
func (x *actExtra) timer(name string) *grainTimer {
	if x.timerIndex != nil {
		return x.timerIndex[name]
	}
	for _, gt := range x.timers {
		if gt.tick.Name == name {
			return gt
		}
	}
	return nil
}

// addTimer adds gt, whose name x has no timer of, to x's timers.
func (x *actExtra) addTimer(gt *grainTimer) {
	gt.slot = int32(len(x.timers))
	x.timers = append(x.timers, gt)
	switch {
	case x.timerIndex != nil:
		x.timerIndex[gt.tick.Name] = gt
	case len(x.timers) > manyTimers:
		x.timerIndex = make(map[string]*grainTimer, len(x.timers))
		for _, t := range x.timers {
			x.timerIndex[t.tick.Name] = t
		}
	}
}

// dropTimer removes gt from x's timers.
func (x *actExtra) dropTimer(gt *grainTimer) {
	i, last := int(gt.slot), len(x.timers)-1
	if i > last || x.timers[i] != gt {
		return // dropped already
	}
	x.timers[i] = x.timers[last]
	x.timers[i].slot = int32(i)
	x.timers[last] = nil
	x.timers = x.timers[:last]
	if x.timerIndex != nil {
		delete(x.timerIndex, gt.tick.Name)
	}
}

// timerHeap orders grain timers by due time (container/heap).
type timerHeap []*grainTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j)
}
func (h *timerHeap) Push(v any) {
	gt := v.(*grainTimer)
	gt.index = int32(len(*h))
	*h = append(*h, gt)
}
func (h *timerHeap) Pop() any {
	old := *h
	gt := old[len(old)-1]
	old[len(old)-1] = nil
	*h = shrink(old[:len(old)-1]) // a million timers stopped let their array go
	gt.index = -1
	return gt
}
