package silo

import (
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Worker states, in the low two bits of worker.word. A worker is the
// goroutine that currently owns a partition.
const (
	wIdle     uint64 = iota // between turns: owns the partition
	wRunning                // running a turn: owns the partition
	wDetached               // running a turn: gave the partition to a new worker
	stateMask = 3
)

// worker is one goroutine's claim on a partition. word holds the worker's
// state and, above it, the number of turns it has started, so that starting
// a turn is one atomic store and ending one is one compare-and-swap.
//
// The turn a worker runs is handed off by moving word from running to
// detached with a CAS: whoever wins that CAS, the worker finishing its turn
// (running -> idle) or the party handing the partition off, decides who owns
// the partition next. The loser of the race changes nothing.
type worker struct {
	p    *partition
	word atomic.Uint64
	seq  uint64          // turns started; written by the worker only
	req  *queues.Request // the ask of the turn running, for a Close after a handoff
	a    *act            // an activation or deactivation turn's activation (see goexit.go)
	sw   *act            // the turn's activation, a stateless worker's (stateless.go, offPartition)
	env  queues.Envelope // and its own copy of its envelope
	slow atomic.Int64    // when the watchdog took the partition from this turn (unix ns)
	// and the process's CPU time then (ns; -1 if the platform does not
	// tell it), for the share of the cores kept busy while the turn went
	// on (reportSlow)
	slowCPU atomic.Int64
	// a sender took the partition from this turn, a flood's slow step
	// (stepoff.go)
	stepped atomic.Bool
	// yielding: the turn yields while it holds its partition, having
	// called another's grain (holdYield); a monitor's handoff then is no
	// slow turn of the grain's
	yielding atomic.Bool
	tc       turnCtx
	gc       grain.Context
	// cur is the Context the turn w runs is given: &gc, set turn after
	// turn, or with Config.CheckContexts one of the turn's own, which
	// gcOver ends with the turn (checkedctx.go)
	cur    *grain.Context
	gcOver *atomic.Bool
	res    turnResult   // the outcome of the turn w ran last
	chain  *filterChain // the filters around a filtered turn's grain; made for the first one
	// the propagator's layer around a turn whose message carries its
	// sender's ctx values (propagate.go); made for the first one
	inject *injector
	from   *worker  // a new owner's: the worker it takes the partition from, until it starts
	kind   turnKind // the kind of the turn w runs (set before it begins)
	// an activation turn's race with the give-up on it (acttimeout.go):
	// reset with a plain store before the turn begins, then used
	// atomically
	actRace int32
	// deciding: the turn's goroutine runs the kind's Decider
	// (partition.decideInTurn), for a Goexit in it (goexit.go)
	deciding bool
	// holdsNext: the next turn execute runs holds its grain's other
	// messages (holding.go); set by the owner before the turn begins
	holdsNext bool
	// holding: the turn w runs holds its grain's other messages, for its
	// calls to say so (waitCall.holds): set as a oneHolds kind's turn
	// begins, read by its calls
	holding atomic.Bool
	labeled *kind // the kind whose profile labels w's goroutine has (labels.go)
	// the parties done with w after it handed its partition off: 2 puts it
	// back in the pool (workerpool.go)
	handoffDone atomic.Int32
	// the ctx of the OnActivate it runs, while it runs (turn.go: hookCtx)
	hook atomic.Pointer[turnCtx]
	// a call of its turn went unanswered: its turn ctx may still be read,
	// so it is not pooled (workerpool.go)
	lent atomic.Bool
	// itc is the ctx of w's tell turns of kinds whose turns interleave,
	// kept apart from tc, and made anew for a turn once a call of the turn
	// before has held its info (ctxUsed): a goroutine of that turn
	// that calls as it ends must find that turn in it, over, and never the
	// next one (endTurnToken). ilv: the turn w runs uses it.
	itc *turnCtx
	ilv bool
}

// newInterleavingCtx makes a worker's itc.
func newInterleavingCtx(p *partition) *turnCtx { return &turnCtx{home: p, wrapped: true} }

// runTask is the goroutine of a worker launched to take over its partition.
func (w *worker) runTask() {
	from := w.from
	w.from = nil // not kept alive by its successor
	w.p.run(w, from)
}

func newWorker(p *partition, detached bool) *worker {
	w := &worker{p: p}
	w.tc.home = p
	w.cur = &w.gc
	if detached {
		w.word.Store(wDetached)
	}
	return w
}

// begin marks the start of a turn.
func (w *worker) begin() {
	w.seq++
	w.word.Store(w.seq<<2 | wRunning)
}

// end marks the end of a turn; false means the partition was handed off
// while it ran.
func (w *worker) end() bool {
	return w.word.CompareAndSwap(w.seq<<2|wRunning, w.seq<<2) // state bits 0: wIdle
}

// detach hands the partition to a fresh worker if w is running a turn. It
// is safe to call from any goroutine. It reports whether it handed off.
func (w *worker) detach() bool {
	for {
		x := w.word.Load()
		if x&stateMask != wRunning {
			return false
		}
		if w.detachAt(x, false) {
			return true
		}
	}
}

// detachAt hands off only if w is still in the turn observed as x. slow
// says the watchdog found the turn holding its partition (rather than the
// turn calling out), so the turn reports itself as slow when it ends.
func (w *worker) detachAt(x uint64, slow bool) bool {
	if x&stateMask != wRunning {
		return false
	}
	p := w.p
	if slow {
		// Read before the CAS: the turn reads both once it finds itself
		// detached. A system call, once for each turn found slow.
		cpu := int64(-1)
		if c, ok := p.s.cpu(); ok {
			cpu = int64(c)
		}
		w.slowCPU.Store(cpu)
		w.slow.Store(time.Now().UnixNano())
	}
	// w's goroutine goes on as a turn, off the partition, and is counted
	// among the turns before the CAS: the moment the CAS succeeds, the turn
	// may end and count itself out (run's turnEnded). The new owner takes
	// w's place among the owners. The caller is an owner (the watchdog, or
	// w itself), so no Wait can be at zero.
	p.s.turnBegun()
	if !w.word.CompareAndSwap(x, x&^stateMask|wDetached) {
		p.s.turnEnded()
		w.slow.Store(0)
		return false
	}
	p.handoffs.Add(1)
	if a := w.sw; a != nil {
		// Read once the CAS has made the turn this one for good: w.sw
		// was set before it began, and is not cleared for a turn that
		// does not end in line.
		p.offPartition(a, 1)
	}
	nw := p.freshWorker()
	nw.from = w
	p.s.runners.launch(nw)
	return true
}
