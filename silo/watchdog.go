package silo

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// watchdog is the handoff monitor's state. The monitor (Silo.watch) looks
// at every partition each HandoffThreshold while turns may be running, and
// sleeps while every partition's owner is parked waiting for work: an idle
// silo must not wake 200 times a second (nor make an hour of a synctest
// bubble's time cost 720,000 wake-ups). The first owner to wake from its
// park wakes it.
//
// The two sides meet Dekker-style on sequentially consistent atomics: the
// monitor sets sleeping and then reads every partition's parked flag; an
// owner clears its parked flag and then reads sleeping. Whatever the order,
// either the monitor sees the owner awake and keeps looking, or the owner
// sees the monitor asleep and wakes it — never neither.
type watchdog struct {
	stop     chan struct{}
	wake     chan struct{} // one token: the monitor's wake-up
	sleeping atomic.Bool
	// now: the silo clock (since Start) at the monitor's last look, with
	// the real clock; what owners in a run of short rounds take instead of
	// reading the clock (partition.tick)
	now atomic.Int64
	// crowded: at the monitor's last look, more goroutines were waiting
	// for a core than crowdedPerP for each: a goroutine that yields
	// (runtime.Gosched) goes behind all of them (see Silo.Ask)
	crowded atomic.Bool
	// runnable: at the monitor's last look, how many goroutines waited
	// for a core (yieldsFor)
	runnable atomic.Uint64
	// hogged: the monitor's looks left during which the silo yields
	// nowhere, a yield having waited out a goroutine's whole time slice
	// (yield.go); counted down at each look
	hogged atomic.Int32
	// suspect: a yield timed on the monitor's reading looked like one
	// behind a hog; the next is timed on the real clock to tell (yield.go)
	suspect atomic.Bool
	// stalled: the silo clock at the monitor's last look that found the
	// process had stood still since the one before (stall.go); a yield
	// spanning it was no hog's doing
	stalled atomic.Int64
	// stalls counts the looks that found the process had stood still
	// (Stats.Stalls)
	stalls atomic.Uint64
	// looks counts the monitor's looks: an owner's round that has seen
	// deliverLooks of them has had its time slice (partition.sliceOver)
	looks atomic.Uint32
}

// crowdedPerP is how many runnable goroutines a P the monitor takes for a
// crowded scheduler, where a yield waits for each of them to run: with
// 1,500 runnable (the example game's 3,000 bots), a turn's yield held its
// partition 150–250 µs on average, 15 ms at worst.
const crowdedPerP = 8

func newWatchdog() watchdog {
	return watchdog{stop: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// kick wakes the monitor if it sleeps. Called by an owner leaving its park.
func (d *watchdog) kick() {
	if d.sleeping.Load() && d.sleeping.CompareAndSwap(true, false) {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// park waits for work on the partition's queue, marking the owner parked
// meanwhile for the monitor.
func (p *partition) park() {
	p.parked.Store(true)
	<-p.q.Wake()
	p.parked.Store(false)
	p.s.dog.kick()
}

// watch is the handoff monitor. Every HandoffThreshold of real time it looks
// at each partition's owner; an owner still inside the same turn it was in at
// the last look has held the partition for at least the threshold, so the
// partition is handed to a new goroutine and the blocked turn finishes on its
// own. It runs on real time, not the silo clock: it keeps the silo live, it
// decides nothing a test should observe. When a look finds every owner
// parked, no turn of a partition can be running, and it sleeps until one
// wakes.
func (s *Silo) watch() {
	defer s.owners.Done()
	d := &s.dog
	t := time.NewTicker(s.cfg.HandoffThreshold)
	defer t.Stop()
	type seen struct {
		w *worker
		x uint64 // state and turn count
	}
	last := make([]seen, len(s.parts))
	runnable := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
	var stall stallWatch
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.looks.Add(1)
		if s.realClk {
			now := s.since()
			if stall.see(now, s.cpu) {
				d.stalled.Store(int64(now)) // before now: a yield that reads now sees it
				d.stalls.Add(1)
			}
			d.now.Store(int64(now))
		}
		if h := d.hogged.Load(); h > 0 {
			d.hogged.CompareAndSwap(h, h-1) // a yield that marks it again wins
		}
		metrics.Read(runnable) // 0.4 µs with 3,000 goroutines runnable
		if v := runnable[0].Value; v.Kind() == metrics.KindUint64 {
			d.crowded.Store(v.Uint64() > uint64(crowdedPerP*runtime.GOMAXPROCS(0)))
			d.runnable.Store(v.Uint64())
		}
		parked := true
		for i, p := range s.parts {
			parked = parked && p.parked.Load()
			w := p.cur.Load()
			if w == nil {
				continue
			}
			x := w.word.Load()
			if last[i].w == w && last[i].x == x {
				// still in the turn seen last time: a no-op unless running;
				// a slow turn unless it only waits for a core in its yield
				w.detachAt(x, !w.yielding.Load())
			}
			last[i] = seen{w, x}
		}
		if !parked || !s.sleepWhileParked() {
			continue
		}
		select {
		case <-d.stop:
			return
		case <-d.wake:
		}
		clear(last)
		stall.forget()
		t.Reset(s.cfg.HandoffThreshold)
	}
}

// sleepWhileParked marks the monitor asleep if every owner is still
// parked; false if one woke meanwhile.
func (s *Silo) sleepWhileParked() bool {
	s.dog.sleeping.Store(true)
	for _, p := range s.parts {
		if !p.parked.Load() {
			// An owner is awake: keep looking. If it kicked meanwhile,
			// its token only makes the next sleep end early.
			s.dog.sleeping.Store(false)
			return false
		}
	}
	return true
}
