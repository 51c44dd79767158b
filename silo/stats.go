package silo

import "github.com/granary-go/granary/grain"

// Stats is a snapshot of a silo's counters. Counters are read one by one
// without stopping the silo, so a snapshot under load is approximate.
type Stats struct {
	// Activations is the number of activations per kind, counting those
	// activating and deactivating.
	Activations map[string]int
	// Handled counts finished turns: messages, activations, deactivations.
	// The turn of a call is counted by the time its caller has the reply;
	// other turns are published once per round of their partition.
	Handled uint64
	// QueueDepth is the number of items waiting in each partition's queue.
	QueueDepth []int
	// Backlog is the number of messages, per partition, that reached their
	// grain and wait in its mailbox (behind a running turn, an activation,
	// a restart or a deactivation, or behind the other grains of the
	// partition while the grain is sent a flood: a round's time slice).
	Backlog []int
	// DeadLetters counts dead letters by reason. A dead letter is counted
	// before an ask's caller gets its error, or a Tell its ErrOverloaded.
	DeadLetters map[grain.Reason]uint64
	// DeadLetterDrops counts dead letters a slow subscriber missed.
	DeadLetterDrops uint64
	// Handoffs counts partitions handed to a new goroutine because a turn
	// blocked, called out, or — a step of a flood of slow turns — held up
	// a message for another grain (StepOffs).
	Handoffs uint64
	// StepOffs counts the handoffs a sender made from a flood's slow step,
	// so that its message for another grain of the partition ran at once
	// on another core (see the package doc's Execution model).
	StepOffs uint64
	// Restarts and Stops count supervision directives carried out.
	Restarts, Stops uint64
	// FailedTells counts turns that failed — an error returned, a panic —
	// with no caller to return it to: tells' and timer ticks'. Each is also
	// logged (Warn for an error, Error for a panic, Debug for the ended
	// ctx's error — context.Canceled, ErrSiloClosed — of a turn a Close
	// ended), with the grain, the error and what supervision decided — a
	// storm of them sampled (Config.LogSampling), while this counts them all.
	FailedTells uint64
	// SlowTurns counts turns that held their partition past
	// Config.HandoffThreshold without calling out (each is also logged at
	// Warn, with the grain, a lower bound of its duration and how busy the
	// process kept its cores meanwhile (coresbusy.go); sampled, as every
	// line is, by Config.LogSampling).
	SlowTurns uint64
	// Stalls counts the times the handoff monitor found the process had
	// stood still as a whole: its own look at least 20 ms late, and the
	// process using less than half of that time on the CPU — a container
	// held at its CPU quota, a machine short of cores. Turns are late then
	// through no grain's fault, and backlogs fill meanwhile. Counted only
	// with the real clock (Config.Clock unset), and only where the process's
	// CPU time can be read (Unix, Windows).
	Stalls uint64
	// QueueWaits counts sends that found their partition's queue full
	// (Config.QueueCapacity) and waited for room: senders outpacing the
	// grains. A send counts once however long it waited, and whether it
	// got in or its ctx ended first (then it is also an overload dead
	// letter).
	QueueWaits uint64
	// BacklogHolds counts the times a grain whose turns run filled its
	// backlog (Config.MaxBacklog, WithMaxBacklog) — sent messages faster
	// than it handles them — so that its senders waited for room
	// (BacklogWaits), while the partition's other grains went on; a hold
	// lasts until the backlog is down to half its limit and no sender has
	// waited for one to two Config.HandoffThresholds. Each is also logged
	// at Warn, with the grain.
	BacklogHolds uint64
	// BacklogWaits counts sends that waited for room in the backlog of a
	// grain that held its senders (BacklogHolds). A send counts once
	// however long it waited, and whether it got in or its ctx ended first
	// (then it is also an overload dead letter).
	BacklogWaits uint64
	// Shed counts activations chosen to deactivate under memory pressure
	// (Config.MemoryLimit), as they are chosen.
	Shed uint64
	// Deactivations counts deactivations by why they happened (the reason
	// OnDeactivate sees), as each begins: idle collection, requests,
	// evictions, shedding, stops, shutdown. A grain whose activation failed
	// or that restarts is not deactivated (the failed instance's
	// OnDeactivate runs before a restart, but the grain stays: Restarts
	// counts it).
	Deactivations map[grain.DeactivationReason]uint64
	// Observers is the number of observers open now: made by NewObserver,
	// not yet closed (a count that only grows is clients that never Close).
	Observers int
	// DroppedLogLines counts lines not written to Config.Logger: held back
	// by Config.LogSampling, lost to a handler that panicked, or left
	// behind by one too slow to keep up (see Config.Logger).
	DroppedLogLines uint64
}

// Stats returns a snapshot of the silo's counters. Safe for concurrent use.
func (s *Silo) Stats() Stats {
	if s.made() != nil {
		return Stats{Activations: map[string]int{}, DeadLetters: map[grain.Reason]uint64{}, Deactivations: map[grain.DeactivationReason]uint64{}}
	}
	if s.state.Load() == stateNew { // Register may be writing kinds
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	st := Stats{
		Activations:     make(map[string]int, len(s.kinds)),
		QueueDepth:      make([]int, len(s.parts)),
		Backlog:         make([]int, len(s.parts)),
		DeadLetters:     make(map[grain.Reason]uint64),
		Deactivations:   make(map[grain.DeactivationReason]uint64),
		DeadLetterDrops: s.dead.drops.Load(),
		Restarts:        s.restarts.Load(),
		Stops:           s.stops.Load(),
		SlowTurns:       s.slowTurns.Load(),
		Stalls:          s.dog.stalls.Load(),
		FailedTells:     s.failedTells.Load(),
		Shed:            s.shedCount.Load(),
		QueueWaits:      s.queueWaits.Load(),
		BacklogWaits:    s.backlogWaits.Load(),
		BacklogHolds:    s.backlogHolds.Load(),
		Observers:       int(s.observers.open.Load()),
		DroppedLogLines: s.logs.dropped.Load(),
	}
	for name, k := range s.kinds {
		st.Activations[name] = int(k.active.Load())
	}
	for i, p := range s.parts {
		st.Handled += p.handled.Load()
		st.Handoffs += p.handoffs.Load()
		st.StepOffs += p.stepOffs.Load()
		st.QueueDepth[i] = p.q.Len()
		st.Backlog[i] = int(p.backlog.Load())
	}
	for r := range s.dead.counts {
		if n := s.dead.counts[r].Load(); n > 0 {
			st.DeadLetters[grain.Reason(r)] = n
		}
	}
	for r := range s.deacts {
		if n := s.deacts[r].Load(); n > 0 {
			st.Deactivations[grain.DeactivationReason(r)] = n
		}
	}
	return st
}
