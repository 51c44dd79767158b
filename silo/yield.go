package silo

import (
	"runtime"
	"time"
)

// The silo yields its goroutine's core (runtime.Gosched) in a few places, to
// let the goroutine it just woke run first: a caller before it parks on its
// reply, which then often needs no park; a turn calling another partition,
// whose owner may answer before the handoff; an owner out of work, so its
// callers' next messages come as one batch; an owner between slices of
// its own bursts, and in a flood's steps once it has answered asks
// (othersWait); and on one core, an owner that has kept the core a while
// (solo.go). A yield puts the goroutine behind every goroutine waiting
// for a core — cheap while those are a few that run briefly, ruinous behind
// one that runs until the scheduler preempts it: a CPU-bound goroutine of
// the program holds its core for a whole time slice (10 ms), and a yield
// waits for it. Two CPU-bound goroutines a core took a lone caller's Call
// from about a microsecond to 2.5 ms on average, 40 ms at times
// (TestAProgramsCPUBoundGoroutinesStopTheYields,
// BenchmarkCallBesideCPUBoundGoroutines).
//
// So the silo watches its yields on the handoff monitor's clock (the
// reading it takes at each look: no clock read of the yield's own, which
// costs pingpong a fifth here): one that spanned a time slice (hogYield)
// marks the scheduler hogged, and the silo yields nowhere for the monitor's
// next looks, about a second, then tries again. A crowd of callers makes
// yields wait too — a thousand goroutines asking, 5–10 ms at worst; the
// example game's 3,000 bots, 1,500 runnable at a time, 20 ms and more — but
// there the yields are what batches them (ask: 12 % slower without the
// callers' yield, 45 % without the owners' as well; the game a third): a
// long yield on a crowded scheduler (watchdog.go) marks nothing. But an
// owner working down a backlog yields at the end of a round only for a
// crowd made of the callers it answered (yieldsFor): one of goroutines
// woken by their timers, their asks timed out, it waited behind for no
// batch. The
// CPU-bound goroutines a yield waits out are few: the scheduler is not
// crowded by them.
//
// The monitor's reading is only as fresh as its last look, and on one core
// the monitor waits for the core like any goroutine: a caller that sent
// for 14 ms (5,000 tells under the race detector) before its yield took a
// reading 14 ms old, and a yield behind an owner that kept the core its
// 5 ms (solo.go) looked 25 ms long. So on one core a long yield on the
// monitor's clock only makes the silo suspect a hog; the next yield is
// timed on the real clock and on the process's CPU time, and marks the
// scheduler hogged if it is long as well and the process ran a hog's time
// slice during it, or clears the suspicion (yieldSince). A true hog makes every yield long: it is
// caught one yield later. With more cores the monitor looks beside the
// goroutines, and a long yield marks the scheduler hogged at once: waiting
// for a second one there let the yields behind CPU-bound senders go on
// (`zipf` 0.93x, eight alternating runs).

// A yield across a stop of the whole process — a container over its CPU
// quota — is as long as one behind a hog: the monitor tells them apart
// from the process's CPU time, and a yield that spans a stall it saw
// marks nothing (stall.go).

// A quiet partition. A yield puts its goroutine on the scheduler's global
// run queue, which a P reads only when its own queue is empty (or every
// 61st schedule): behind every goroutine runnable there, such as callers
// woken by their timers or the network. Where the yields batch a loaded
// silo's calls that wait is paid back; at an ordinary load, calls coming
// one at a time, it is not: 1,000 callers asking 20,000 times a second
// waited 25–30 µs a call at the median (timed from each caller's start),
// where a caller that parks at once is woken by the owner's reply into
// its P's next slot (runnext), and runs right after the owner: 5 µs. So an owner that waited quietWait or more,
// parked, before its last message marks its partition quiet
// (partition.noteWait), and there a call that finds nothing queued ahead
// of it (Queue.PushOrWait's first) parks without yielding (Silo.Ask), and
// an owner that has handled that one message parks without its yield
// (partition.step). Where messages stream — a loaded silo, a lone caller
// asking in a loop, two grains bouncing a message — the owner waits for
// the next a microsecond or two, and every yield stays; so does the yield
// of a caller that finds others queued ahead of it, whose reply comes
// after theirs. The bench's steady workload and docs/performance.md ("At a
// steady load") have the figures.

// quietWait is how long an owner must have waited for work, parked, for
// its partition to be quiet. A lone caller in a loop or two grains
// bouncing a message mostly keep their owner's waits under 2 µs on a
// 2-core machine; callers paced at 20,000 calls a second leave it waiting
// tens of microseconds and more. At 5 µs, bursts of a 50,000-a-second load
// left fewer partitions quiet (p50 44 µs against 15–30 at 3 µs).
const quietWait = 3 * time.Microsecond

// hogYield is how far the monitor's clock must move during a yield to show
// a goroutine holding its core for a whole time slice: twice the
// scheduler's 10 ms (the clock moves a HandoffThreshold at a time), well
// above the 5–10 ms a crowd of a thousand callers made a yield wait.
const hogYield = 20 * time.Millisecond

// hogCPU is how much CPU time the process must have used during a long
// yield on one core for the yield to have waited for a hog: half of
// hogYield, the scheduler's time slice — what a goroutine that holds its
// core runs before it is preempted.
const hogCPU = hogYield / 2

// hoggedFor is about how long the silo stops yielding once it saw a hog.
const hoggedFor = time.Second

// yieldsFor reports whether an owner that has answered n asks since it
// last let its callers run yields for them now. Always, unless the
// scheduler is crowded (watchdog.go) by more than crowdShare goroutines
// for each of those callers: the yield waits for every goroutine waiting
// for a core, and what it is for — the callers it answered running and
// sending again, their next asks taken as one batch — is then a small
// share of the wait. A thousand callers asking in a loop are the crowd
// the yields batch (without the owners' yields `ask` made 0.61 M/s
// against 0.88); a thousand callers whose asks time out, their grains'
// turns 100 µs each, crowd it with goroutines woken by their timers, a few
// answered a round: the owners, yielding behind them at every round of a
// backlog, ran 40,000–55,000 turns in 4 s where the floor's design ran
// 63,000–69,000; 57,000–58,000 now, `ask` as before
// (TestAnOwnerDoesNotYieldBehindACrowdItDidNotAnswer; docs/performance-log.md,
// item 90).
func (s *Silo) yieldsFor(n uint64) bool {
	return !s.dog.crowded.Load() || n*crowdShare >= s.dog.runnable.Load()
}

// crowdShare: see yieldsFor.
const crowdShare = 16

// yield runs runtime.Gosched, unless a yield lately showed the scheduler
// hogged (see above). With a clock other than the real one the monitor
// keeps no reading, and no yield is taken for a hog.
func (s *Silo) yield() {
	if s.dog.hogged.Load() > 0 {
		return
	}
	if s.dog.suspect.Load() {
		s.yieldSince(time.Now())
		return
	}
	at := s.dog.now.Load()
	runtime.Gosched()
	if s.dog.now.Load()-at >= int64(hogYield) && !s.dog.crowded.Load() && s.dog.stalled.Load() <= at {
		if s.oneP {
			s.dog.suspect.Store(true)
		} else {
			s.dog.hogged.Store(s.hogLooks())
		}
	}
}

// yieldSince is yield for an owner that read the real clock at the end of
// a run of its own work, at: it times the yield from then. The monitor's
// reading is no measure there: on one core the monitor waits for the
// owner's core as any goroutine does, so its last reading is as old as the
// owner's run, and a yield after a run of 20 ms looked like one behind a
// hog — the silo stopped yielding for a second, and the callers a flood's
// partition answered waited 20 ms each for the scheduler to preempt it.
//
// Nor is the real clock, on one core, on a machine short of CPUs: there
// the whole process waits for one now and then — a container over its CPU
// quota, four test binaries on two cores — and a yield across such a wait
// looks as long as one behind a hog. CI's one-core step failed on it: the
// silo stopped yielding, and a flood's callers waited 19 ms each
// (TestOnOneCoreTheCallersOfAFloodedPartitionRunSoon; with four busy
// loops beside it, three false hogs in forty runs). So on one core a long
// yield only makes the silo suspect a hog, as on the monitor's reading,
// and the next yield — the owner's, every few milliseconds while it works
// (solo.go) — is timed on the process's CPU time as well: behind a hog the
// process ran it for the hog's time slice (hogCPU); across a wait for a
// CPU it hardly ran. Where the platform does not tell the CPU time, the
// second long yield marks the hog. With more cores a long yield marks it
// at once, as yield's do, once the monitor has looked and seen the process
// run all along (stall.go).
func (s *Silo) yieldSince(at time.Time) {
	if s.dog.hogged.Load() > 0 {
		return
	}
	confirm := s.oneP && s.dog.suspect.Load()
	var cpu0 time.Duration
	cpuKnown := false
	if confirm {
		cpu0, cpuKnown = s.cpu()
	}
	runtime.Gosched()
	long := s.realClk && time.Since(at) >= hogYield && !s.dog.crowded.Load()
	switch {
	case long && !s.oneP:
		// The monitor looks beside the owner: a hog if it looked during
		// the yield and saw the process run all along (stall.go). If it
		// has not looked since, it stood still as well.
		if from := int64(at.Sub(s.epoch)); s.dog.now.Load() > from && s.dog.stalled.Load() <= from {
			s.dog.hogged.Store(s.hogLooks())
		}
	case long && !confirm:
		s.dog.suspect.Store(true)
		return
	case long && cpuKnown:
		if cpu1, ok := s.cpu(); ok && cpu1-cpu0 >= hogCPU {
			s.dog.hogged.Store(s.hogLooks())
		}
	case long:
		s.dog.hogged.Store(s.hogLooks())
	}
	if s.dog.suspect.Load() {
		s.dog.suspect.Store(false) // told, either way
	}
}

// hogLooks is how many of the handoff monitor's looks make hoggedFor, one at
// least.
func (s *Silo) hogLooks() int32 {
	return int32(max(1, min(hoggedFor/s.cfg.HandoffThreshold, 1<<20)))
}

// mayYieldHolding reports whether a turn may yield before it hands its
// partition off: not with the scheduler hogged or crowded (watchdog.go),
// where the partition, still its own while it yields, would wait with it.
func (s *Silo) mayYieldHolding() bool {
	return s.dog.hogged.Load() == 0 && !s.dog.crowded.Load()
}

// holdYield is the yield of a turn that called a grain of another
// partition while it holds its own (Silo.Ask). The partition stays held
// while the goroutine waits for a core, and a wait past the handoff
// monitor's two looks — a burst of callers woken together, a collection —
// made the monitor hand the partition off and log the turn as slow,
// naming a grain whose code had done nothing slow (half the `slow turn`
// lines of the bench's relay workload). So the worker says it is
// yielding, and the monitor, at its second look as before, hands such a
// turn off as a turn that calls out is handed off: without a report
// (watchdog.go).
func (w *worker) holdYield() {
	w.yielding.Store(true)
	if f := w.p.s.testHoldYield; f != nil {
		f()
	} else {
		runtime.Gosched()
	}
	w.yielding.Store(false)
}
