package silo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/granary-go/granary/directory"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/idle"
	"github.com/granary-go/granary/internal/prefetch"
	"github.com/granary-go/granary/queues"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// partition is one of the silo's fixed set of queues, with the activations
// whose identities hash to it. Everything under "owner" is touched only by the
// goroutine that currently owns the partition, so none of it is locked.
type partition struct {
	// read by senders: kept apart from what the owner writes, so that a
	// send does not pull a cache line the owner is writing
	s       *Silo
	idx     int
	q       *queues.Queue[queues.Envelope, ctl]
	ovN     atomic.Int32 // len(ov), for the cheap "nothing is overloaded" check
	ovSlots atomic.Pointer[ovSlots]
	// a flood's slow step under way, published for senders (stepoff.go):
	// the worker running it, the word of its turn, its grain's hash
	stepOff  atomic.Pointer[worker]
	stepWord atomic.Uint64
	stepHash atomic.Uint64
	stepBusy atomic.Int32 // senders inside stepAside
	// the hash of a grain whose flood of slow turns is worked down, 0 if
	// none; and whether a sender pushed a message for another grain
	// while no step was published (stepoff.go: neighbourCame)
	flooding   atomic.Uint64
	othersCame atomic.Bool
	// a turn sent a message here since the owner last looked for the
	// messages of work under way (ahead.go)
	turnSent atomic.Bool
	_        [64]byte

	// base is the silo's base ctx, one child a partition: the parent of its
	// grains' OnDeactivate ctxs, which then register with it, not all with
	// the one the other partitions share (Start sets it; Silo.endBase ends
	// it).
	base    context.Context
	endBase context.CancelFunc
	live    liveCtxs // handler ctxs that made their own Done channel: Close ends them

	// owner
	dir        *directory.Table[act]
	wheel      *idle.Wheel[struct{}]
	lru        *simplelru.LRU[grain.ID, *act] // nil when the silo has no cap
	shedHist   []int32                        // shed's histogram, made at its first (memory.go)
	shedding   shedRun                        // the shed under way (memory.go)
	limit      int
	quarantine map[grain.ID]time.Duration
	quarPeak   int                      // the most quarantine has held since it was made (regrow)
	actFails   map[grain.ID]*actFailure // identities whose activation failed lately; nil when none
	actWatch   []actWatch               // activation turns handed off while they ran (acttimeout.go)
	stopsAhead map[grain.ID]stopPoint   // Stops of inactive grains read with the current batch; nil when none
	shutAt     stopPoint                // where the Shutdown stood among the messages (sentBeforeShutdown)
	backoffs   map[*act]*grainTimer     // restarts' backoffs under way, in the timer heap (backOff); nil when none
	ahead      aheadScan                // the look for work under way in the current batch (ahead.go)
	ready      []*act
	rhead      int
	round      uint16        // counts rounds, by two; a grain's Round is the last in which a message ran as it came (ranInline)
	lookSeen   uint32        // the monitor's looks when the last message ran as it came (ranInline)
	lastRan    *act          // the grain of that message, this round; nil before the first
	streak     int           // lastRan's messages that ran as they came in a row this round, less one (floodStreak)
	streakAt   time.Time     // the clock as the streak's message streakFrom (from 0) began
	sliceAt    uint32        // the monitor's looks when the round began delivering (sliceOver)
	evicted    int           // grains this round's activations evicted (evict) and not stepped yet
	delivered  time.Duration // how long the round's deliveries took, timed if grains waited ready from the round before (othersWait)
	holders    []heldGrain   // served grains whose full backlog holds their senders (hold)
	// flooder: the grain a streak of its messages showed to be flooded,
	// or whose flood steps were measured slow (slice.go); nil once its
	// flood is over. On one core the owner yields often while it is worked
	// down (solo.go).
	flooder *act
	// streakFlood: this round's deliveries found a flood in a streak of
	// its turns (floodStreak); its steps wait for the queue to be read
	// once more (step)
	streakFlood bool
	// steppedFor: this owner took the partition from a flood's step a
	// sender stepped off, and delivers what came first (takeSteppedFor)
	steppedFor bool
	// asks answered (resolve), and their count when a flood's steps last
	// let the callers run (othersWait)
	answered, answeredSeen uint64
	answeredRound          uint64 // answered when the round began (step: prefetching on one P)
	batch                  queues.Batch[queues.Envelope, ctl]
	// the directory's guesses prefetchAhead made for the coming messages,
	// by their place in the owner's stream (nDelivered counts them): the
	// delivery and the grain's prefetch take them instead of looking again
	guesses    [guessRing]guess
	nDelivered uint64
	multiP     bool      // GOMAXPROCS > 1 at Start: prefetchAhead pays (see prefetchMin)
	solo       soloClock // with GOMAXPROCS 1 at Start (multiP false): when to yield (solo.go)
	yields     uint32    // the owner's yields and parks between turns, counted for solo
	ctls       []ctl
	cpos       int
	expired    []*idle.Entry[struct{}]
	idleMore   bool          // an opIdleMore is queued: the idle collection goes on (collectExpired)
	now        time.Duration // the silo clock at this round (tick)
	// rounds since now was last read from the clock, and nHandled then
	clockRounds int
	clockAt     uint64
	inflight    int                          // turns running, inline or on other goroutines (abandoned: some of them)
	orphans     map[*queues.Request]struct{} // asks being handled off the partition
	orphanPeak  int                          // the most orphans has held since it was made (regrow)
	mode        mode
	keptBusy    []keptBusy      // while the silo settles: what kept the partition busy (unsettled.go)
	timers      partitionTimers // owner: its grains' timers (timers.go)
	done        chan struct{}   // closed when the partition has stopped for good
	grace       holdGraces      // held grains whose turns the monitor took or senders stepped off (holdgrace.go)
	over        chan struct{}   // closed at birth: the Done of a turn's ctx that is over (ownCtx)

	// shared
	cur      atomic.Pointer[worker] // the owner, for the watchdog
	handled  atomic.Uint64          // published from nHandled once per round
	nHandled uint64                 // owner
	waitedAt uint64                 // owner: nHandled when the owner last yielded before waiting
	handoffs atomic.Uint64
	stepOffs atomic.Uint64 // of them, from a flood's slow step (stepoff.go)
	backlog  atomic.Int64  // messages waiting in mailboxes
	// for a stateless worker's senders (stateless.go): messages to
	// stateless kinds pushed here and not yet delivered, counted up by
	// their senders and down by the owner; and turns of stateless grains
	// running here, inline or handed off
	swQueued atomic.Int64
	swBusy   atomic.Int64
	// swBusyIDs: those turns off the partition by the identity's hash
	// (busyBucket), and swSickIDs the quarantined identities, so a sender
	// can tell whether its identity's activation here is busy or stopped
	swBusyIDs *[busyBuckets]atomic.Int32
	swSickIDs *[busyBuckets]atomic.Int32
	ovMu      sync.Mutex
	ov        map[grain.ID]*doorEntry // grains whose backlog is full: their doors (door.go)
	parked    atomic.Bool             // the owner waits for work (see watchdog)
	// quiet: the owner's last wait for work, parked, lasted quietWait or
	// more — its messages come one at a time, not in a stream (yield.go)
	quiet atomic.Bool
	// idleQuiet: at its last idle collection the partition had nothing
	// left for the idle ticks (idleticks.go)
	idleQuiet atomic.Bool
	idleLen   atomic.Int64      // grains in the idle wheel at the last idle tick (memory.go)
	waits     waitShard         // the wait-for edges of this partition's grains (deadlock.go)
	walk      walk              // the owner's deadlock walks' buffers (deadlockwalk.go)
	stuck     []*queues.Request // rewalkBehind's: the asks its walk found stuck
	// firstsOut: activation turns whose factory or hook failed, handing
	// their first message back to the owner (turnResult.firstOut); a
	// closing partition does not stop before it has them (stopped)
	firstsOut atomic.Int32
	// offTurns: turns started off the partition as they began — hooks
	// whose kind's hooks run long, turns of a kind WithBlockingTurns —
	// still running (blocking.go)
	offTurns atomic.Int32
	spare    sync.Pool // workers of finished handoffs (workerpool.go)
	// workers freshWorker had to make: a test's window on the pool
	workersMade atomic.Uint64

	// owner: of the turns running (inflight), the hooks the owner gave up
	// on — an OnActivate or OnDeactivate past its bound — which a Shutdown
	// waits for no longer (waitedFor). Last, so that it moves none of the
	// shared fields above to another cache line.
	abandoned int
}

func newPartition(s *Silo, idx, limit int) (*partition, error) {
	dir, err := directory.NewTable[act](func(a *act) *grain.ID { return &a.ID })
	if err != nil {
		return nil, err
	}
	p := &partition{
		s:          s,
		idx:        idx,
		q:          queues.New[queues.Envelope, ctl](s.cfg.QueueCapacity),
		dir:        dir,
		limit:      limit,
		quarantine: make(map[grain.ID]time.Duration),
		ov:         make(map[grain.ID]*doorEntry),
		orphans:    make(map[*queues.Request]struct{}),
		done:       make(chan struct{}),
		over:       make(chan struct{}),
		swBusyIDs:  new([busyBuckets]atomic.Int32),
		swSickIDs:  new([busyBuckets]atomic.Int32),
	}
	close(p.over)
	if limit > 0 {
		// Sized above the limit: evictions are ours to choose (idle grains
		// only), never the LRU's own.
		if p.lru, err = simplelru.NewLRU[grain.ID, *act](2*limit+16, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// run is the body of a goroutine that owns the partition until it hands the
// partition off or the partition stops.
// from is the worker it took the partition from, if any: its turn goes on
// off the partition, and its ask (if it is one) is recorded so that a Close
// can answer it.
func (p *partition) run(w, from *worker) {
	exited := true // until the loop ends: a handler that called runtime.Goexit unwinds past it
	defer func() {
		if exited {
			p.goexited(w)
		}
	}()
	p.cur.Store(w)
	p.tick(true)
	p.takeTimers()
	if from != nil {
		if from.req != nil {
			p.orphans[from.req] = struct{}{}
			notePeak(&p.orphanPeak, len(p.orphans))
		}
		p.stepOff.CompareAndSwap(from, nil) // a step handed off otherwise: a call, the monitor
		p.watchActivation(from)
		p.graceFrom(from)
		if from.stepped.Load() {
			p.takeSteppedFor()
		}
		p.doneWith(from) // read: it may be pooled once its turn is over too
	}
	for p.step(w) {
	}
	exited = false
	if w.word.Load()&stateMask == wDetached {
		p.s.turnEnded() // this goroutine ends as a turn handed off, not an owner
		// An activation's worker stays watched (acttimeout.go); a lent one's
		// ctx may still be read (workerpool.go).
		if w.kind != tkActivate && !w.lent.Load() {
			p.doneWith(w)
		}
	} else {
		p.quitOwner()
	}
}

// How far ahead of the message being delivered the owner prefetches: the
// queue's line that holds the message envAhead places on, the directory
// slot of the message slotAhead places on (its address needs only the
// hash), the activation record of the message actAhead places on (its
// address is in the slot, prefetched by then), and the grain itself of the
// message grainAhead places on (its address is in the record, prefetched by
// then). With many grains, most deliveries would otherwise miss the cache
// on the slot, the record and the grain, one after the other.
//
// It pays with few grains too: the queue's lines were written by the
// senders, on other cores, and come over late unless asked for early
// (`tell` +8 % at 5,000 grains a partition and at 50 from the slot and
// record, and +5 % more from the envelope line, further ahead). Only a
// short batch goes without, where Peek finds nothing that far on
// (`pingpong`: one message at a time).
//
// The record is prefetched to be written (PREFETCHW): the turn writes it,
// and the turn's first locked instruction (worker.begin) waits for every
// store before it. A line fetched only to be read comes shared when
// another core holds it written — as the records do, an owner's goroutine
// moving between cores with its partition's — and the turn's store to it
// then waited for that core's copy to be invalidated: the instruction
// after begin's store took 36 % of the `tell` child's CPU, 12 % now;
// `tell` 1.21–1.30x (alternating child runs, eight and six rounds).
// The grain stays a read: prefetched to be written it showed no clear
// gain (`zipf` 1.01x and 1.03x; BenchmarkTellManyGrains once 14 % faster
// at 10,000 grains, once 30 % slower at 200,000).
//
// With GOMAXPROCS 1 no sender writes on another core, and it pays only
// once the records outgrow the caches: below prefetchMin activations in the
// partition, `tell` is 7–11 % faster without it (at 100 and 10,000 grains;
// about even at 40,000–70,000), and `zipf`, 100,000 grains, 16 % slower —
// or when the partition answers asks: between its rounds their callers
// run on its core, each on its own stack, and push its lines out (`ask`,
// 1,000 callers of 10,000 grains on one P: 1.38x with it, eight
// alternating runs; it is on for a round after one that answered).
// With two Ps it pays at every size (`tell` 7–9 %).
//
// The grain's own prefetch pays once the grains outgrow the caches, from
// about grainPrefetchMin activations in the partition, and costs a little
// below (BenchmarkTellManyGrains, grains of a cache line, two Ps, two
// partitions: at 200,000 grains a tell 35 % faster, at 50,000 16 %, at
// 20,000 even, at 10,000 3 % slower — and `tell`, 10,000 grains, about 5 %
// slower — hence the threshold; on one P, at 200,000, 43 % faster).
const (
	envAhead    = 16
	slotAhead   = 8
	actAhead    = 4
	grainAhead  = 2
	prefetchMin = 1 << 16

	grainPrefetchMin = 1 << 13
)

// prefetchAhead starts loading what the coming messages will touch; far is
// the message slotAhead places on. grains says whether to prefetch the
// grains as well.
//
// The directory's guess it makes to find a record to prefetch is kept
// (guesses): the grain's prefetch two places on and the delivery itself
// take it rather than look again — three lookups a message had been
// 25 % of an owner's time (BenchmarkOwnerRound, 10,000 grains, two Ps:
// 93 → 77 ns a message; `tell` +2 %, `activate` +4 %, alternating child
// runs). A guess is taken only while no entry has left the directory
// since it was made (directory.Table.Deletes): a turn delivered in
// between may end a grain, and its message would go to a record no longer
// in the directory (TestADeliveryNeverTakesAGuessOfAnEntryRemovedSince).
func (p *partition) prefetchAhead(far *queues.Envelope, grains bool) {
	if env := p.batch.Peek(envAhead - 1); env != nil {
		prefetch.Line(uintptr(unsafe.Pointer(env)))
	}
	// p.nDelivered counts the message being delivered: the one actAhead
	// places on is nDelivered+actAhead.
	at := p.nDelivered + actAhead
	a := p.dir.Guess(p.batch.Peek(actAhead - 1).Hash)
	p.guesses[at%guessRing] = guess{at: at, deletes: p.dir.Deletes(), a: a}
	prefetch.LineAndRecordW(p.dir.HomeAddr(far.Hash), uintptr(unsafe.Pointer(a)))
	if !grains {
		return
	}
	if g := &p.guesses[(p.nDelivered+grainAhead)%guessRing]; g.at == p.nDelivered+grainAhead && g.a != nil {
		prefetch.Pointee(uintptr(unsafe.Pointer(&g.a.g)) + grainData)
	}
}

// A guess is the directory's guess for the grain of the message at in the
// owner's stream, made when deletes entries had been removed from the
// directory.
type guess struct {
	at      uint64
	deletes uint64
	a       *act
}

// guessRing holds the guesses from actAhead places on back to the message
// being delivered.
const guessRing = 8

// guessFor returns the directory's guess for env, the message being
// delivered: the one prefetchAhead made for it, if it made one and no
// entry left the directory since — then it is nil or an entry still in
// the directory, the message's grain's or another's, which deliver tells
// by comparing identities as ever (and then, or for nil, looks the grain
// up in full) — or else a guess made now.
func (p *partition) guessFor(env *queues.Envelope) *act {
	if g := &p.guesses[p.nDelivered%guessRing]; g.at == p.nDelivered && g.deletes == p.dir.Deletes() {
		return g.a
	}
	return p.dir.Guess(env.Hash)
}

// grainData is the offset in an interface value of its data word: the
// pointer to the grain.
const grainData = unsafe.Sizeof(uintptr(0))

// step does one round: control messages, then user messages, then one turn
// of each ready activation, then refills from the queue (blocking if there
// is nothing to do). It returns false when w no longer owns the partition.
func (p *partition) step(w *worker) bool {
	for p.cpos < len(p.ctls) {
		c := p.ctls[p.cpos]
		p.ctls[p.cpos] = ctl{}
		p.cpos++
		if !p.control(w, c) {
			return false
		}
	}
	// Messages are read in place (see runTurn for why that is safe).
	p.round += 2 // the low bit of a grain's Round marks it blamed (ranInline)
	p.sliceAt = p.s.dog.looks.Load()
	p.lastRan = nil
	var deliverAt time.Time
	if p.rhead < len(p.ready) {
		deliverAt = time.Now() // a backlog is being worked down: its steps' share is the deliveries' time
	}
	ahead := p.multiP || p.dir.Len() >= prefetchMin || p.answered != p.answeredRound
	p.answeredRound = p.answered
	grains := p.dir.Len() >= grainPrefetchMin
	if p.aheadDue(1) && !p.runAhead(w) {
		return false
	}
	for env := p.batch.Next(); env != nil; env = p.batch.Next() {
		p.nDelivered++
		if ranAhead(env) {
			continue
		}
		if far := p.batch.Peek(slotAhead - 1); far != nil && ahead { // near a segment's end, the few left go unprefetched
			p.prefetchAhead(far, grains)
		}
		if !p.deliverGuessed(w, env, p.guessFor(env)) {
			return false
		}
		if p.aheadDue(0) && !p.runAhead(w) {
			return false
		}
		if p.evicted >= readyBatch && !p.stepEvicted(w) {
			return false
		}
		if !p.multiP {
			p.soloTurn()
		}
	}
	p.evicted = 0
	p.delivered = 0
	if !deliverAt.IsZero() {
		p.delivered = time.Since(deliverAt)
	}
	// Ready grains take as many steps as messages were delivered, and
	// readyBatch at least: grains with a backlog keep pace with new
	// messages, and a burst of deactivations goes by in slices.
	// A flood the deliveries found in a streak of its turns steps only
	// once the queue has been read again: what waits there came while its
	// first turns ran, as they came — each a neighbour's message that
	// waited for them, or more of the flood, for its mailbox before its
	// steps. Stepping first, its neighbours waited for the flood's share
	// of steps as well (400 µs with turns of 200 µs).
	steps := true
	if p.streakFlood {
		p.streakFlood = false
		steps = p.q.Len() == 0
	}
	if steps && !p.runReady(w, max(readyBatch, p.batch.Taken())) {
		return false
	}
	p.handled.Store(p.nHandled)
	if p.mode != modeRunning && p.stopped() {
		return false
	}
	p.stopsAhead = nil // they concern only the batch read with them, now done
	if (p.rhead < len(p.ready) || p.idleMore || p.timers.more || p.shedding.on) && p.s.yieldsFor(p.answered-p.answeredRound) {
		// A burst of the owner's own work — deactivations, idle
		// collection, shedding, ticks — goes on next round: let the
		// callers this round answered run first, as when out of work
		// (below). With the
		// cores busy they would otherwise wait for the scheduler to preempt
		// the owner, 10 ms at a time (BenchmarkIdleBurst: the callers of
		// other grains waited up to 14-20 ms, now 5-10). Not behind a
		// CPU-bound goroutine, whose whole time slice the owner would wait
		// for at each slice of the burst (yield.go).
		p.s.yieldSince(time.Now())
		p.yields++
	}
	if len(p.holders) > 0 {
		p.holding()
	}
	p.ctls = p.q.DrainInto(&p.batch, reuse(p.ctls, len(p.ctls)))
	p.cpos = 0
	if p.batch.Empty() && len(p.ctls) == 0 && p.rhead == len(p.ready) && p.nHandled != p.waitedAt {
		// Out of work after a busy round: the callers it answered are
		// runnable now, likely on this P. Let them run before parking, so
		// their next requests arrive as one batch instead of waking the
		// owner once each. (Not behind a CPU-bound goroutine: yield.go.)
		// But not after a lone message on a quiet partition: nothing
		// batches there, and its caller, which parked at once, is next on
		// this core (yield.go).
		yield := p.yieldsOutOfWork()
		p.waitedAt = p.nHandled
		if yield {
			p.s.yield()
			p.yields++
			p.ctls = p.q.DrainInto(&p.batch, reuse(p.ctls, 0))
		}
	}
	parked := false
	var from time.Duration
	if p.batch.Empty() && len(p.ctls) == 0 && p.rhead == len(p.ready) {
		if p.s.realClk {
			from = p.s.since()
		}
		p.ctls = reuse(p.ctls, 0) // not a burst's array held through the wait
		p.park()
		p.ctls = p.q.DrainInto(&p.batch, p.ctls)
		parked = true
		p.yields++ // it gave its core up
	}
	p.tick(parked)
	if parked && p.s.realClk {
		p.noteWait(p.now - from)
	}
	return true
}

// yieldsOutOfWork reports whether the owner, out of work after a round
// that handled messages, yields before it parks: not after the lone
// message of a quiet partition (yield.go).
func (p *partition) yieldsOutOfWork() bool {
	return p.nHandled-p.waitedAt != 1 || !p.quiet.Load()
}

// callerYields reports whether a caller whose ask p has queued yields
// before it parks on the reply: not when its ask was first in the queue
// of a quiet partition (yield.go). first is the push's (Silo.push).
func (p *partition) callerYields(first bool) bool {
	return !first || !p.quiet.Load()
}

// noteWait marks the partition quiet or not by how long its owner just
// waited for work, parked (see yield.go).
func (p *partition) noteWait(d time.Duration) {
	if q := d >= quietWait; q != p.quiet.Load() {
		p.quiet.Store(q) // only on a change: callers read it
	}
}

// readyBatch is how many steps of ready activations a round takes at least
// (runReady): a few milliseconds' work at most, at a deactivation's cost.
const readyBatch = 256

// How often an owner reads the clock in a run of short rounds: at least
// every clockRounds rounds and every clockTurns messages.
const (
	clockRounds = 64
	clockTurns  = 64
)

// tick sets p.now, the time idle deadlines, backoffs and quarantines are
// measured from, for the next round. A round of one or two messages — two
// grains telling each other, light load — would spend a tenth of its time
// reading the clock (pingpong on one P: +19 % without), so with the real
// clock a run of short rounds reads it only every clockRounds rounds and
// clockTurns messages, and in between takes the watchdog's reading, taken
// every HandoffThreshold while any owner is awake: p.now lags the clock
// by at most that (5 ms by default; a turn that runs longer is handed off,
// and its new owner reads the clock). It reads the clock after a park,
// which may have lasted any time, and always with any other clock, which
// a test moves by hand.
func (p *partition) tick(parked bool) {
	p.clockRounds++
	if parked || !p.s.realClk || p.clockRounds >= clockRounds || p.nHandled-p.clockAt >= clockTurns {
		p.now = p.s.since()
		p.clockRounds, p.clockAt = 0, p.nHandled
		return
	}
	if t := time.Duration(p.s.dog.now.Load()); t > p.now {
		p.now = t
	}
}

// waitedFor is how many of the partition's turns run that a Shutdown
// waits for: all but the hooks the owner gave up on, which go on alone
// (an OnActivate past Config.ActivationTimeout, an OnDeactivate past
// Config.DeactivationTimeout). Waited for too, each such hook held the
// Shutdown until its ctx ended, bounds and all. Owner only.
func (p *partition) waitedFor() int { return p.inflight - p.abandoned }
