package silo

// turnBegun counts a turn that leaves its partition (a handoff, an
// interleaved turn) in s.turns, and in s.liveTurns, which a stop reads
// without waiting: one that does not wait for the turns must not warn of
// turns that have all ended. Never on the message path.
func (s *Silo) turnBegun() {
	s.liveTurns.Add(1)
	s.turns.Add(1)
}

// turnEnded counts such a turn out.
func (s *Silo) turnEnded() {
	s.liveTurns.Add(-1)
	s.turns.Done()
}
