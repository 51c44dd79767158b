package silo

import (
	"sync/atomic"
	"time"
)

// Turns that block start off their partition: the turns of a kind
// registered WithBlockingTurns, each of them (runTurn, execute), and the
// hooks of a kind whose hooks have been blocking, as below.
//
// A grain's OnActivate and OnDeactivate are where it loads and saves its
// state: a database's round trip, a millisecond or more, written as Go
// code is — a blocking call. Run on its partition like any turn, a hook
// that blocked for less than Config.HandoffThreshold held the partition
// for all of it, and a partition ran such hooks one after another: a
// Shutdown of 1,000 grains each saving for 2 ms took 1.1 s (900 saves a
// second, on two partitions), every message of the partitions' other
// grains waiting behind each save; a cold start loading as many, the same.
// Orleans' hooks are asynchronous, and run side by side.
//
// So a kind whose hooks have been taking long starts its next ones off
// the partition, as if each began in Await: the partition goes to another
// goroutine as the hook begins, and runs the next grain's hook — or
// message — at once, while the grain itself waits for its hook as it
// always did (its messages stay in its mailbox until the hook ends). A
// kind's hooks go off once two in a row have run hookOffAfter or more: a
// hook that only sets fields or starts a timer keeps running on the
// partition, where going off would cost a handoff each — and one that
// took long once, its goroutine preempted or its code cold (the race
// detector's first run of it took 0.3 ms), sends none off: a burst of new
// grains past the activation cap then activated off the partition, beyond
// the eviction's slices, 2,655 alive against a cap of 100. A partition
// has at most Config.MaxBlockingTurns hooks off at once — past them a hook runs on
// the partition, which then waits for it — so a Shutdown of a million
// grains saving to a slow store does not start a million goroutines, nor
// a million saves at the store at once.

// hookOffAfter: two hooks in a row that ran this long send their kind's
// next hooks of the same sort off the partition (hookOffRuns of them at
// least). A database's round trip on the same host takes about as long.
const hookOffAfter = 200 * time.Microsecond

// hookOffRuns: how many hooks in a row, once two ran long, go off the
// partition before those that ran short bring them back: a store that
// answers some loads from a cache and others from a disk keeps its
// hooks off.
const hookOffRuns = 16

// hookStats is what a kind knows of its recent hooks of one sort.
type hookStats struct {
	long atomic.Int32 // hooks in a row that ran long, up to 2
	off  atomic.Int32 // hooks to start off the partition, counted down by quick ones
}

// hookBegin starts a hook of a's kind, whose recent hooks of its sort h
// keeps: off the partition if they ran long and it has room. It returns
// when the hook began and whether it went off, for hookEnd. Called on the
// turn's own goroutine, as the hook is about to run.
func (p *partition) hookBegin(w *worker, h *hookStats) (time.Time, bool) {
	t0 := time.Now()
	return t0, h.off.Load() > 0 && p.startOff(w)
}

// startOff hands w's partition to another goroutine as w's turn is about
// to block, if fewer than Config.MaxBlockingTurns turns started off the
// partition still run (Silo.maxOff), and reports whether it did; the turn
// calls endOff as it ends if so. No room, or the turn off already (the
// watchdog found its factory slow, a give-up, an earlier startOff in the
// turn): it runs where it is.
func (p *partition) startOff(w *worker) bool {
	if p.offTurns.Add(1) > p.s.maxOff || !w.detach() {
		p.offTurns.Add(-1)
		return false
	}
	return true
}

// endOff ends a turn startOff started off the partition.
func (p *partition) endOff() { p.offTurns.Add(-1) }

// hookEnd ends a hook hookBegin began at t0, off the partition or not,
// and keeps h. Called on the turn's goroutine as the hook returns; it
// touches only atomics, since the partition may have moved on.
func (p *partition) hookEnd(h *hookStats, t0 time.Time, off bool) {
	if off {
		p.endOff()
	}
	if time.Since(t0) >= hookOffAfter {
		if n := h.long.Load(); n < 2 {
			n = h.long.Add(1)
			if n < 2 {
				return
			}
		}
		if h.off.Load() != hookOffRuns {
			h.off.Store(hookOffRuns)
		}
		return
	}
	if h.long.Load() != 0 {
		h.long.Store(0)
	}
	if n := h.off.Load(); n > 0 {
		h.off.CompareAndSwap(n, n-1) // a hook that ran long meanwhile wins
	}
}
