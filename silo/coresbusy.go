package silo

import (
	"math"
	"runtime"
	"time"
)

// What held a slow turn. The handoff monitor times a turn on the wall
// clock, so a turn it finds holding its partition may have run its
// handler all along — a computation, a wait on I/O, a lock, a sleep — or
// done next to nothing while its goroutine waited for a core: Go lets a
// CPU-bound goroutine keep its core 10 ms before it preempts it, and a
// turn preempted with every core taken waits for one (the bench's
// do-nothing turns, held 5–41 ms beside CPU-bound producers, were that:
// the process used both cores throughout; docs/performance.md), or the
// host stopped the whole process. Go tells no goroutine's CPU time, but
// the process's it does, so the slow turn's line says how busy the
// process kept its cores (GOMAXPROCS of them) from the handoff to the
// turn's end: cores_busy near 1, every core was taken, and a turn that
// does little waited for one; near 0, nothing ran — a turn that blocks
// waited on what it blocks on, and one that does not was stopped with
// the process.

// busyWindow is the shortest stretch from the handoff to a turn's end
// whose CPU time the line states: over less, a single scheduler tick of
// another thread would swing it.
const busyWindow = time.Millisecond

// coresBusy is the share of GOMAXPROCS cores the process used over the
// since that followed a slow turn's handoff, rounded to hundredths and
// at most 1, given its CPU time at the handoff (cpu0, ns, -1 if unknown);
// false if it is not known or the stretch was too short to say.
func (s *Silo) coresBusy(since time.Duration, cpu0 int64) (float64, bool) {
	if cpu0 < 0 || since < busyWindow {
		return 0, false
	}
	c, ok := s.cpu()
	if !ok {
		return 0, false
	}
	share := float64(int64(c)-cpu0) / (float64(since) * float64(runtime.GOMAXPROCS(0)))
	return math.Round(min(max(share, 0), 1)*100) / 100, true
}
