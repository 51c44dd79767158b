package silo

import "time"

// A process can stand still as a whole: a container over its CPU quota has
// every thread stopped until the next period (tens of milliseconds under
// Kubernetes' CPU limits), a machine short of CPUs leaves it waiting for
// one. A yield across such a stop is as long as one behind a goroutine
// that holds its core for a whole time slice, and on its length alone the
// silo took it for a hog and stopped yielding for a second (yield.go) —
// with two cores, a stop of 40 ms every 100 ms marked a hog about once a
// second in `pingpong`, `tell` and `zipf`. The handoff monitor tells the
// two apart: across a stop its own looks stop too, and the process uses
// next to no CPU, where behind a hog the hog itself runs. So at each look
// it reads the process's CPU time (processCPU: a system call, at most
// every stallRead), and a gap of at least hogYield since the last reading
// in which the process ran less than half the time is a stall; a yield
// that spans the end of one marks nothing.

// stallRead is how often at most the monitor reads the process's CPU
// time: its looks come every HandoffThreshold, which may be 10 µs.
const stallRead = time.Millisecond

// stallWatch is the monitor's last reading of the process's CPU time, and
// when (the silo clock) it took it. Only the monitor uses it.
type stallWatch struct {
	at, cpu time.Duration
	read    bool // at and cpu hold a reading
}

// see takes the monitor's look at now, reading the process's CPU time
// with cpu, and reports whether the process stood still since the last
// reading. It reads only stallRead after the last reading.
func (w *stallWatch) see(now time.Duration, cpu func() (time.Duration, bool)) (stalled bool) {
	if w.read && now-w.at < stallRead {
		return false
	}
	c, ok := cpu()
	if !ok {
		return false
	}
	if w.read {
		gap := now - w.at
		stalled = gap >= hogYield && c-w.cpu < gap/2
	}
	*w = stallWatch{at: now, cpu: c, read: true}
	return stalled
}

// forget drops the reading: the monitor slept, and the gap to its next
// look is not a stall.
func (w *stallWatch) forget() { w.read = false }
