package silo

import "time"

// WaitLogged waits until every line logged so far has been written to
// Config.Logger: a test reads the log once the lines it expects are there.
func (s *Silo) WaitLogged() {
	w := s.logw
	w.mu.Lock()
	running, drained := w.running, w.drained
	w.mu.Unlock()
	if running {
		<-drained
	}
}

// WorkersMade counts the workers the silo's handoffs had to make, not
// finding one in their partition's pool (workerpool.go).
func (s *Silo) WorkersMade() uint64 {
	var n uint64
	for _, p := range s.parts {
		n += p.workersMade.Load()
	}
	return n
}

// OnFailedActivation has f run in each failed activation's turn, between
// its race with the owner and its handing the first message back. Set it
// before Start.
func (s *Silo) OnFailedActivation(f func()) { s.testFailedActivation = f }

// InHoldYield has f run in place of the yield of a turn that called a
// grain of another partition while it holds its own.
func (s *Silo) InHoldYield(f func()) { s.testHoldYield = f }

// StartCrowd and StartHogs start goroutines that keep the scheduler busy —
// a crowd yielding in a loop, CPU-bound hogs — for benchmarks (crowded_test.go).
var (
	StartCrowd = startCrowd
	StartHogs  = startHogs
)

// YieldsOff reports whether the silo yields nowhere now, having taken a
// yield for one behind a CPU-bound goroutine (hogged, yield.go), and
// whether the monitor last saw the scheduler crowded, where an owner does
// not yield to its answered callers (answeredYield).
func (s *Silo) YieldsOff() (hogged, crowded bool) {
	return s.dog.hogged.Load() > 0 || s.dog.suspect.Load(), s.dog.crowded.Load()
}

// GraceFor is the grace of a turn the handoff monitor takes at threshold
// from a grain whose senders were held back (holdgrace.go).
func GraceFor(threshold time.Duration) time.Duration { return graceFor(threshold) }

// ProcessCPUKnown reports whether the platform tells the process's CPU
// time (cputime_*.go).
func ProcessCPUKnown() bool {
	_, ok := processCPU()
	return ok
}

// ProcessCPU reads the process's CPU time, where the platform tells it
// (cputime_*.go).
var ProcessCPU = processCPU
