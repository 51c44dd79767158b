package silo

import (
	"sync/atomic"

	"github.com/granary-go/granary/grain"
)

// Worker states. A worker is the goroutine that currently owns a partition.
const (
	wIdle     uint32 = iota // between turns: owns the partition
	wRunning                // running a turn: owns the partition
	wDetached               // running a turn: gave the partition to a new worker
)

// worker is one goroutine's claim on a partition. The turn it runs is handed
// off by moving state from wRunning to wDetached with a CAS: whoever wins
// that CAS, the worker finishing its turn (wRunning -> wIdle) or the party
// handing the partition off, decides who owns the partition next. The loser
// of the race changes nothing.
type worker struct {
	p     *partition
	state atomic.Uint32
	seq   atomic.Uint64 // turns started; the watchdog samples it
	tc    turnCtx
	gc    grain.Context
}

func newWorker(p *partition, detached bool) *worker {
	w := &worker{p: p}
	if detached {
		w.state.Store(wDetached)
	}
	return w
}

// detach hands the partition to a fresh worker if w is running a turn. It
// is safe to call from any goroutine. It reports whether it handed off.
func (w *worker) detach() bool {
	if !w.state.CompareAndSwap(wRunning, wDetached) {
		return false
	}
	p := w.p
	p.s.workers.Add(1) // w is still counted, so the group cannot be waiting at zero
	p.handoffs.Add(1)
	go p.run(newWorker(p, false))
	return true
}
