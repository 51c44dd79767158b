package silo

import "github.com/granary-go/granary/queues"

// A handoff gives the partition to a new worker while the old one finishes
// its turn off the partition. Each worker was a fresh allocation, 375 of
// the 806 bytes a call from a turn to a grain of its own partition cost
// (BenchmarkNestedCall): a partition keeps the workers of finished handoffs
// and hands them out again.
//
// Two parties read a handed-off worker after the handoff: the worker itself,
// finishing its turn, and the new owner, which takes the turn's ask into its
// records (partition.run). A worker goes back to the pool once both are
// done with it (doneWith), never before: a worker reused while the new owner
// still read it would hand over another turn's ask. The worker of an
// activation turn is never pooled: the owner watches it until the
// activation ends or is given up on (acttimeout.go), and a worker whose
// goroutine ended in runtime.Goexit is left to the collector (goexit.go).
//
// Nor is the worker of a turn that made a call that went unanswered — one
// its caller gave up on, or one that failed — while the turn's ctx was the
// worker's own (a tell's, a tick's, a hook's): the callee's ctx has the
// caller's among its parents, and a handler that outlives the call it
// serves (its caller gave up; an activation given up on goes on with its
// hook) may read it through them. Reused, the worker would reset that ctx
// under the reader's feet (TestAHandlerOutlivingItsCallerReadsAStableCtx
// failed under -race without this rule). Since then turnCtx.reset rewrites
// only the fields that change, none that such a reader reads, which alone
// keeps the test green; the rule stays, so that the safety of a live
// reader does not rest on which fields a reset happens to write. A call
// answered with a reply has no such reader: its turn is over.
//
// A reused worker keeps its count of turns started, and so the sequence in
// its word: a watchdog's snapshot of it from before (watchdog.go) never
// matches it again, as it would not a new worker's.

// freshWorker returns a worker to take the partition over: a pooled one, or
// a new one. Safe for concurrent use (the watchdog hands off too).
func (p *partition) freshWorker() *worker {
	w, _ := p.spare.Get().(*worker)
	if w == nil {
		p.workersMade.Add(1)
		return newWorker(p, false)
	}
	w.word.Store(w.seq << 2) // wIdle, at the turn count it had
	w.req, w.a, w.sw, w.env, w.from = nil, nil, nil, queues.Envelope{}, nil
	w.kind, w.actRace, w.deciding, w.ilv = 0, 0, false, false
	w.slow.Store(0)
	w.stepped.Store(false)
	w.res = turnResult{}
	w.labeled = nil // it will run on another goroutine, with other labels
	w.handoffDone.Store(0)
	w.lent.Store(false) // (w.hook is cleared by every activation turn before it begins)
	return w
}

// doneWith records that one of the two parties reading a handed-off worker
// is done with it; the second puts it back in the pool.
func (p *partition) doneWith(w *worker) {
	if w.handoffDone.Add(1) == 2 {
		p.spare.Put(w)
	}
}

// lend marks the worker of the calling turn ti (nil when the caller is no
// grain) as one whose turn ctx may be read after its turn: never pooled.
// Safe for concurrent use: a turn's goroutines may call at once.
func (ti *turnInfo) lend() {
	if ti != nil {
		ti.w.lent.Store(true)
	}
}
