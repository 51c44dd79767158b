package silo

import (
	"time"

	"github.com/granary-go/granary/activation"
)

// A grace for a turn the handoff monitor took.
//
// The monitor cannot tell a turn that blocks from one whose goroutine waits
// for a core: on a loaded machine, any turn may wait out another goroutine's
// whole time slice (10 ms in Go's scheduler), and a turn the monitor finds
// in two of its looks is handed off. A grain whose turn is off its partition
// overflows by its policy (backlogFull) — so a grain sent messages faster
// than it handles them, whose senders waited for room (at its door, its full
// backlog holding them: hold, slice.go; or in the queue, its turns running
// as they came), had the next messages past its limit refused or dropped the
// moment a turn of it waited for a core. Two goroutines telling a grain of
// 20 µs turns in a loop, its backlog at 1,000 (RejectNewest), one partition
// on two cores: 8,000–31,000 of some 70,000 tells refused in every run that
// had a handoff (11 of 50); the same program, one preemption apart, lost
// nothing in the others. With the grace, none of 50 runs refused a tell (18
// had a handoff; docs/performance-log.md, item 42).
//
// So a grain whose turn the monitor took — a message's, or its
// activation's: a hot key's first message at a cold start, its turn held
// off its core, had what came past its limit refused or dropped the same
// way (TestAnActivationHeldOffItsCoreRefusesNothing) — counts as served
// for a grace of graceThresholds HandoffThresholds, 100 ms at least
// (minGrace): a full backlog holds its senders at its door, as before the
// handoff (an activating grain's hold is kept through its grace:
// activatingInGrace). A
// preempted turn is back on a core within it (its senders waiting, the
// cores come free); the turn ends, and the grain is served again, as if
// the handoff had not been (TestAGrainPreemptedOffItsPartitionRefusesNothing,
// TestAGrainHeldOffItsCoreManyThresholdsRefusesNothing). A turn still off
// when the grace ends is taken for blocked: what the grain was sent during
// the grace counts toward its limit, and the policy applies to what is past
// it at once — the oldest dropped, or the next refused, the senders that
// waited through the grace first (TestAGrainBlockedPastTheGraceOverflows,
// TestSendersWaitingThroughAGraceAreRefusedWhenItEnds) — as if the grace had
// not been. The price is a blocked grain's senders wait a grace before they
// are refused.
//
// Every such grain has it. Only grains whose senders were held back — at
// the door, or the queue full — or that were working down a backlog had it
// once, on the reasoning that a grain that kept up with what it was sent
// and whose turn then stopped taking messages was blocked; but the host
// holds a grain that kept up as readily as one behind: a grain sent a
// message every 600 µs, its backlog limit 8, lost 230 of 400 to a stall of
// 40 ms, refused or dead letters, and with the grace none
// (TestAGrainThatKeptUpHeldOffItsCoreRefusesNothing; a grain behind with
// room left and nobody waiting, TestAGrainBehindWithRoomKeepsItsSenderThroughAGrace,
// needed a rule of its own then). A turn that went off by its own choice —
// a call, Await, a blocking kind's turn — has one too, from the moment
// its backlog fills while it waits (waitGrace): it is known to wait, but
// most waits are short. A call back on the waiting turn's chain passes
// the door, whatever it is (Silo.atDoor). A deactivation has none: what
// comes for a deactivating grain waits for the activation that follows it. An
// activation given up on (acttimeout.go) in its grace leaves with it
// (remove ends it, as it opens the grain's door), so nothing of its hold
// is left for the grain that follows
// (TestAnActivationGivenUpInItsGraceLeavesNoOverload).
//
// The grace is timed on the real clock (the monitor's), and a timer wakes
// the owner when it ends: an owner with nothing else to do parks, and the
// monitor sleeps while every owner does.

// graceThresholds is how many HandoffThresholds a grace lasts at least:
// at the default, 10 ms, Go's time slice.
const graceThresholds = 2

// minGrace is the shortest grace, whatever the threshold: a turn's
// goroutine waits for a core not only for Go's scheduler but for the
// host's. On the shared VMs the bench runs on, turns that do next to
// nothing were held 7–44 ms at times (the monitor's slow-turn lines), and
// the zipf workload's hottest grain, its turn held 12 ms against a grace of
// 10, lost 581 tells as overload dead letters (docs/performance-log.md,
// the hundred-and-thirty-second run). A grace costs no memory — what comes
// meanwhile is what was in flight as the door shut, at most a queue's
// worth — only the wait of a blocked grain's senders before they are
// refused: 100 ms is still failing fast.
const minGrace = 100 * time.Millisecond

// graceFor is the grace of a turn handed off at threshold.
func graceFor(threshold time.Duration) time.Duration {
	return max(graceThresholds*threshold, minGrace)
}

// holdGraces are the partition's graces, one a grain whose turn is off
// (two floods stepped off at once, or the monitor taking one grain's turn
// while another's is stepped off: a single grace, taken over by the
// second, ended the first's early, and a flood's step was published for
// senders only while no other grain's grace ran — beside a second flood,
// half its steps). Owner state, but for the timer's function, which only
// pushes a control item; one timer serves them all, set for the first to
// end.
type holdGraces struct {
	list []holdGrace // usually none, or one
	t    *time.Timer
	next time.Time // when t is set to fire; zero if it is not
}

// holdGrace is one grain's grace. Once over, with the grain's turn still
// off, it stays listed, spent, until the turn ends (endGrace): one grace a
// wait, so a grain blocked past its grace is not given another the next
// time its backlog fills (waitGrace).
type holdGrace struct {
	a   *act      // the grain in grace
	end time.Time // when it ends; zero once spent
	// base: the backlog the grain had at the handoff that it took while
	// served (its senders held), which does not count toward its limit
	// once its turn is off (heldGrain.base); 0 if it did not hold them
	base int
}

// graceFrom starts a grace for the grain whose turn — a message's or an
// activation's — the new owner took the partition from, if the monitor
// took it (not a call) or a sender stepped it off.
func (p *partition) graceFrom(from *worker) {
	stepped := from.stepped.Load()
	if from.kind == tkDeactivate || from.slow.Load() == 0 && !stepped {
		return
	}
	// The turn's record, as begin published it (an activation turn's, as
	// runOtherTurn did); from is not pooled before this owner is done with
	// it (run), nor reused for another turn.
	a := from.a
	if from.kind == tkMessage {
		a = turnCtxOf(from, from.req).info.a
	}
	if a == nil {
		return
	}
	p.startGrace(a)
}

// startGrace starts a's grace now, or starts it again.
func (p *partition) startGrace(a *act) {
	held := p.heldNow(a)
	d := graceFor(p.s.cfg.HandoffThreshold)
	gs := &p.grace
	i := gs.index(a)
	if i < 0 {
		gs.list = append(gs.list, holdGrace{a: a})
		i = len(gs.list) - 1
	}
	g := &gs.list[i]
	g.end, g.base = time.Now().Add(d), 0
	if held {
		g.base = a.Mailbox.Len()
	}
	switch {
	case gs.t == nil:
		gs.t = time.AfterFunc(d, func() { p.q.PushControl(ctl{op: opGraceOver}) })
		gs.next = g.end
	case gs.next.IsZero():
		gs.t.Reset(d) // graces all last d: with others running, the timer is set for the first to end
		gs.next = g.end
	}
}

// waitGrace starts a grace for a grain whose backlog fills while a turn of
// it waits off the partition by its own choice — in a call, in Await, a
// turn of a kind registered WithBlockingTurns or a hook sent off
// (blocking.go) — unless this wait has had one, and reports whether it
// did. Such a turn is known to wait, but not for how long: most waits end
// in microseconds or milliseconds (a grain that calls another, or writes
// to a store, a message at a time), and the grain takes its next message
// once it ends, as a served grain would. Without the grace the policy
// applied at once, to a grain kept at its limit by its senders: one that
// asked another grain a question a message, sent 2,000 tells at a backlog
// limit of 100, handled 101 and lost 1,899, refused or dead letters after
// their Tell returned nil; a kind WithBlockingTurns whose turns wrote for
// 1 ms, the same (TestAGrainWhoseTurnsWaitHoldsItsSenders). A wait that
// outlasts the grace overflows then, as a turn the monitor took does.
// The grace starts as the backlog fills, not as the turn went off —
// nothing records that — so a grain whose wait is long already when its
// backlog fills keeps its senders a grace more before they are refused.
func (p *partition) waitGrace(a *act) bool {
	if p.mode != modeRunning || !a.busy() || a.State() > activation.Active || a.wantsDeactivate() || a.isStopping() ||
		p.grace.index(a) >= 0 {
		return false
	}
	p.startGrace(a)
	return true
}

// index returns where a's grace is in the list, -1 if it has none.
func (gs *holdGraces) index(a *act) int {
	for i := range gs.list {
		if gs.list[i].a == a {
			return i
		}
	}
	return -1
}

// drop removes the grace at i.
func (gs *holdGraces) drop(i int) {
	last := len(gs.list) - 1
	gs.list[i] = gs.list[last]
	gs.list[last] = holdGrace{}
	gs.list = gs.list[:last]
}

// graced reports whether a is in a grace: its turn is off the partition,
// but a full backlog of it holds its senders.
func (p *partition) graced(a *act) bool {
	i := p.grace.index(a)
	return i >= 0 && !p.grace.list[i].end.IsZero()
}

// endGrace ends the grace of a, if it has one: its turn is back.
func (p *partition) endGrace(a *act) {
	if i := p.grace.index(a); i >= 0 {
		p.grace.drop(i)
	}
}

// graceOver handles the timer's opGraceOver: each grace that has run its
// time ends, and a grain whose turn is still off overflows by its policy
// from its backlog at the handoff; the timer is set again for the first
// of those left.
func (p *partition) graceOver() {
	gs := &p.grace
	now := time.Now()
	var next time.Time
	for i := 0; i < len(gs.list); {
		g := &gs.list[i]
		switch {
		case g.end.IsZero() && g.a.busy(): // spent, its turn still off
		case g.end.IsZero() || !now.Before(g.end) && !g.a.busy():
			gs.drop(i) // back: nothing to apply
			continue
		case now.Before(g.end):
			if next.IsZero() || g.end.Before(next) {
				next = g.end
			}
		default:
			g.end = time.Time{} // spent: listed until the turn ends
			p.graceEnded(*g)
		}
		i++
	}
	gs.next = next
	if !next.IsZero() {
		gs.t.Reset(next.Sub(now))
	}
}

// graceEnded applies the end of g, if its grain's turn is still off.
func (p *partition) graceEnded(g holdGrace) {
	a := g.a
	if !a.busy() || p.mode != modeRunning { // back, or the holds are over (holding)
		return
	}
	h := p.holderOf(a)
	if h == nil {
		return // its backlog never filled: nothing to apply
	}
	h.off, h.base = true, g.base
	n := a.Mailbox.Len() - g.base
	switch {
	case a.k.overflow == DropOldest:
		for ; n > a.k.maxBacklog && p.mbDropOldest(a); n-- {
		}
	case n+1 >= a.k.maxBacklog:
		if n > a.k.maxBacklog {
			p.mbDropNewest(a, g.base+a.k.maxBacklog) // what came in the grace past the limit goes, as at the door
		}
		p.setOverfull(a, true) // before the door opens: who waited there is refused (Silo.atDoor)
	}
	p.openDoor(h)
}

// stopGrace stops the grace timer of a partition that has stopped.
func (p *partition) stopGrace() {
	if gs := &p.grace; gs.t != nil {
		gs.t.Stop()
		clear(gs.list)
		gs.list = gs.list[:0]
		gs.next = time.Time{}
	}
}

// activatingInGrace reports whether a is activating, its activation turn
// taken by the monitor and in its grace: its full backlog holds its
// senders at its door as a served grain's does (holding keeps the hold).
func (p *partition) activatingInGrace(a *act) bool {
	return a.State() == activation.Activating && p.graced(a)
}
