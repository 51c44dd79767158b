package silo

// Idle ticks: once per IdleQuantum every partition collects its idle grains
// (partition.collectIdle). A silo with nothing for them to do — no grain
// that can go idle, no quarantine or activation failure to forget, no spare
// queue segment to give back — does not tick at all: an idle silo, or one
// whose grains live for good (IdleTimeout < 0), must not wake every
// partition once a quantum (and a synctest bubble's hour must not cost
// thousands of rounds). The watchdog sleeps the same way (watchdog.go).
//
// The ticker and the owners meet Dekker-style on sequentially consistent
// atomics: the ticker sets idleAsleep and then reads every partition's
// idleQuiet; an owner clears its idleQuiet and then reads idleAsleep.
// Either the ticker sees the owner's work and keeps ticking, or the owner
// sees the ticker asleep and wakes it — never neither.

// scheduleIdle schedules the next idle tick, at the next multiple of the
// quantum since Start: a ticker woken from its sleep keeps the phase it
// would have had. Called with s.mu held.
func (s *Silo) scheduleIdle() {
	q := s.cfg.IdleQuantum
	d := q - s.since()%q
	s.idleTimer = s.clock.AfterFunc(d, s.idleTick)
}

// idleTick asks every partition to collect its idle grains, then schedules
// the next tick, unless every partition found nothing to do at its last.
func (s *Silo) idleTick() {
	shed := 0
	if st := s.state.Load(); st == stateRunning {
		// Once for the silo, and before s.mu: the gauge may be the
		// program's code, which must not hold up a Shutdown.
		shed = s.shedShare()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ticking() {
		return
	}
	for _, p := range s.parts {
		p.q.PushControl(ctl{op: opIdleTick, ahead: shed})
	}
	if s.state.Load() == stateRunning {
		s.lookSoon(false)
	}
	if s.quietEverywhere() {
		s.idleAsleep.Store(true)
		if s.quietEverywhere() {
			s.idleTimer = nil
			return
		}
		// An owner found work meanwhile; if it also saw idleAsleep and
		// is waiting for s.mu to wake the ticker, wakeIdleTicks finds it
		// awake already.
		s.idleAsleep.Store(false)
	}
	s.scheduleIdle()
}

func (s *Silo) quietEverywhere() bool {
	for _, p := range s.parts {
		if !p.idleQuiet.Load() {
			return false
		}
	}
	return true
}

// wakeIdleTicks restarts the idle ticks if they sleep. Called by an owner
// whose partition has work for them again.
func (s *Silo) wakeIdleTicks() {
	if !s.idleAsleep.Load() || !s.idleAsleep.CompareAndSwap(true, false) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ticking() && s.idleTimer == nil {
		s.scheduleIdle()
	}
}

// ticking reports whether the idle ticks go on: while the silo runs, and
// through a graceful Shutdown until a Close or the stop's end, for an
// activation that hangs is given up on then too (checkActivations: else
// the Shutdown waited out its ctx for it, and made the messages that
// waited dead letters as a shutdown's). s.mu held.
func (s *Silo) ticking() bool {
	switch s.state.Load() {
	case stateNew, stateRunning:
		return true
	case stateStopping:
		return !s.closing && !s.finishing
	}
	return false
}

// stopIdle stops the looks at memory, and the idle ticks unless they go on
// (ticking). s.mu held.
func (s *Silo) stopIdle() {
	if s.idleTimer != nil && !s.ticking() {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	if s.memTimer != nil {
		s.memTimer.Stop()
		s.memTimer = nil
	}
}

// needIdleTicks marks the partition as having work for the idle ticks —
// a grain to watch for idleness, a quarantine or an activation failure to
// forget — and wakes the ticks if they sleep. Owner only; one atomic load
// while the partition has such work already.
func (p *partition) needIdleTicks() {
	if p.idleQuiet.Load() {
		p.idleQuiet.Store(false)
		p.s.wakeIdleTicks()
	}
}

// noteIdleQuiet records, at the end of an idle collection, whether the
// partition has anything left for the idle ticks — the queue's spare
// segments included, which the ticks give back once unused (a partition
// that keeps drawing on them keeps the ticks going, as it should).
func (p *partition) noteIdleQuiet() {
	if p.wheel.Len() == 0 && len(p.quarantine) == 0 && p.actFails == nil && len(p.actWatch) == 0 && p.q.Spare() == 0 {
		p.idleQuiet.Store(true)
	}
}
