package silo

import "time"

// Looking at memory between idle ticks. Shedding decides at a look at
// memory, and the idle ticks look once a quantum — a second by default.
// A burst of activations outran that: 10,000 grains of 100 KB, activated
// at 3,300 a second against a 200 MB limit, took the heap to 715–767 MB
// before the ticks had shed enough, the sheds a second apart. So while a
// look finds memory past the limit, the silo looks again every
// memLookEvery until it is back within (or shedding can take nothing
// more), each look shedding at once the share it finds short (opShed):
// the same burst peaked at 415–446 MB (with the default gauge a shed
// waits for a GC's figure, so a look that asks for a GC decides at the
// next one). A quiet silo pays nothing: no look is scheduled while memory
// is within the limit.

// memLookEvery is how often the silo looks at memory between idle ticks
// while it is past Config.MemoryLimit. An IdleQuantum no longer than this
// looks as often at every tick already.
const memLookEvery = 100 * time.Millisecond

// lookSoon schedules a look at memory memLookEvery from now if the last
// look found it past the limit, shedding may still take something, the
// idle ticks are further apart, and no look is scheduled. After a look
// (not a tick), only while some partition had a grain to shed at its last
// idle tick: memory held by something else is looked at once a tick, not
// ten times (a tick's own look cannot tell yet — the partitions count
// their grains as they take the tick, after it). s.mu held.
func (s *Silo) lookSoon(afterLook bool) {
	if s.memTimer != nil || s.cfg.IdleQuantum <= memLookEvery || !s.shedPending() || afterLook && !s.anySheddable() {
		return
	}
	s.memTimer = s.clock.AfterFunc(memLookEvery, s.memLook)
}

// shedPending reports whether the last look found memory past the limit
// and shedding not futile.
func (s *Silo) shedPending() bool { return s.shed.pending.Load() }

// memLook looks at memory between two idle ticks, asks every partition to
// shed at once the share it finds short, and schedules the next look while
// memory stays past the limit.
func (s *Silo) memLook() {
	ppm := 0
	if s.state.Load() == stateRunning {
		ppm = s.shedShare() // before s.mu, as at a tick: the gauge may be the program's code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.memTimer = nil
	if s.state.Load() != stateRunning {
		return
	}
	if ppm > 0 {
		for _, p := range s.parts {
			p.q.PushControl(ctl{op: opShed, ahead: ppm})
		}
	}
	s.lookSoon(true)
}
