package silo

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// The door: what a sender finds for a grain whose backlog is full, before
// its message goes into the partition queue.
//
// A grain whose turns do not run (blocked in a turn, activating, on its way
// out) and whose backlog is full refuses at the door, by its RejectNewest
// policy: the send fails with ErrOverloaded (backlogFull). A grain whose turns
// run — served, sent messages faster than it handles them, or in a grace
// (holdgrace.go): a turn of it held off its core, or waiting a moment off the
// partition — makes its senders wait at the door until its backlog has room,
// bounded by their ctx (hold, slice.go): its senders are held back, and no
// other grain's. The partition's queue was held instead, until its backlog had
// room, which held every sender of the partition, and let the grain's backlog
// pass its limit by a queue's worth of messages whenever the hold let go (a
// limit of 1,000 held 17,000 messages; docs/performance-log.md, items 43 and
// 44).
//
// Senders learn a grain's door from the partition's set of grains with a
// door shut (ov), which the owner keeps: one atomic load tells most sends
// their target is not in it.

// door says which of a grain's doors are shut. A grain whose backlog is
// full and whose turns do not run refuses (doorRefuse) even if it held its
// senders before (doorWait).
type door uint8

const (
	doorRefuse door = 1 << iota // refused at the door (markOverfull)
	doorWait                    // held: its senders wait, past a budget (heldGrain)
)

// doorEntry is a grain's entry in the set. A held grain's door lets in as
// many senders as the owner last found room for in its backlog (budget),
// and holds the rest: opened wide whenever the backlog had room, its
// senders filled the queue while the owner worked through the round, and
// a limit of 1,000 held 17,000 messages. The owner sets the budget again
// each round (holding), so a backlog passes its limit by one round's
// budget at most.
//
// The senders held wait in line (waiters), and the budget goes to them
// first, each let in by the closing of its own channel: woken all at once
// to race for the budget, a thousand callers of a grain of 20 µs turns
// (a backlog of 100) spent 12 % more CPU a message, and a caller that lost
// the race again and again waited 240–300 ms where the median waited
// 15; in line, 31–38 ms at most.
type doorEntry struct {
	shut    door
	budget  int
	waiters []chan struct{}
	waited  bool // a sender waited since the owner last set the budget
}

// setOverfull shuts a's door to refuse its senders, or opens it again.
func (p *partition) setOverfull(a *act, full bool) {
	if a.isOverfull() == full {
		return
	}
	a.setOverfullMark(full)
	p.setDoor(a, doorRefuse, full, 0)
}

// setDoor shuts (on) or opens the door d of a, for senders; budget is a
// shut doorWait's, which lets in the senders waiting first. It reports
// whether a sender waited at a's held door since the last call.
func (p *partition) setDoor(a *act, d door, on bool, budget int) (waited bool) {
	p.ovMu.Lock()
	defer p.ovMu.Unlock()
	slots := p.ovSlots.Load()
	if slots == nil {
		slots = new(ovSlots)
		p.ovSlots.Store(slots)
	}
	e := p.ov[a.ID]
	if e == nil {
		if !on {
			return false
		}
		e = &doorEntry{}
		p.ov[a.ID] = e
		slots[ovSlot(a.ID.Hash())].Add(1)
		p.ovN.Store(int32(len(p.ov)))
	}
	waited = e.waited || len(e.waiters) > 0
	e.waited = false
	if on {
		e.shut |= d
	} else {
		e.shut &^= d
	}
	if d == doorWait {
		e.budget = budget
	}
	if e.shut&doorWait == 0 {
		e.budget = len(e.waiters) // open: all of them in
	}
	for e.budget > 0 && len(e.waiters) > 0 {
		close(e.waiters[0])
		e.waiters[0] = nil
		e.waiters = e.waiters[1:]
		e.budget--
	}
	if e.shut == 0 {
		delete(p.ov, a.ID)
		slots[ovSlot(a.ID.Hash())].Add(-1)
		p.ovN.Store(int32(len(p.ov)))
	}
	return waited
}

// ovSlots counts a partition's grains with a door shut by a few bits of
// their identity's hash: a sender whose target's slot is empty knows, from
// one atomic load, that its target is not among them, and takes no lock —
// while one hot grain sheds load, the sends to the partition's other
// grains went through the lock every time (BenchmarkTellBesideOverloaded).
type ovSlots [256]atomic.Int32

// ovSlot is the slot of the identity whose hash is h: its low bits, which
// the partition's own choice (the high word of h × the partitions:
// queues.Partitioner) leaves spread — the top ones are much the same
// across a partition.
func ovSlot(h uint64) uint64 { return h & (uint64(len(ovSlots{})) - 1) }

// mayBeShut reports whether the grain whose hash is h may have a door
// shut: false, from an atomic load or two, for most sends.
func (p *partition) mayBeShut(h uint64) bool {
	if p.ovN.Load() == 0 {
		return false
	}
	slots := p.ovSlots.Load()
	return slots != nil && slots[ovSlot(h)].Load() != 0
}

// doorOf returns, for a sender, the door of the grain whose identity is
// id, of hash h: 0 if it lets the sender in (taking one of a held grain's
// budget, if no one waits before it), and for doorWait the channel whose
// closing lets the sender in, its place in line. It costs an atomic load
// or two unless a grain with a door shut shares its target's slot.
func (p *partition) doorOf(id grain.ID, h uint64) (door, chan struct{}) {
	if !p.mayBeShut(h) {
		return 0, nil
	}
	p.ovMu.Lock()
	defer p.ovMu.Unlock()
	e := p.ov[id]
	switch {
	case e == nil:
		return 0, nil
	case e.shut&doorRefuse != 0:
		return doorRefuse, nil
	case e.budget > 0 && len(e.waiters) == 0:
		e.budget--
		return 0, nil
	}
	ch := make(chan struct{})
	e.waiters = append(e.waiters, ch)
	e.waited = true
	return doorWait, ch
}

// leaveDoor takes the sender waiting on ch out of the line at id's door,
// and reports false; true if it was let in meanwhile.
func (p *partition) leaveDoor(id grain.ID, ch chan struct{}) (in bool) {
	p.ovMu.Lock()
	defer p.ovMu.Unlock()
	if e := p.ov[id]; e != nil {
		if i := slices.Index(e.waiters, ch); i >= 0 {
			e.waiters = slices.Delete(e.waiters, i, i+1)
			return false
		}
	}
	return true // an entry that went let its line in
}

// overfull reports whether a sender to id is refused at the door. Unlike
// doorOf, it takes no budget and no place in line.
func (p *partition) overfull(id grain.ID, h uint64) bool {
	if !p.mayBeShut(h) {
		return false
	}
	p.ovMu.Lock()
	defer p.ovMu.Unlock()
	e := p.ov[id]
	return e != nil && e.shut&doorRefuse != 0
}

// atDoor passes env's sender through its target's door: at once if it is
// open, with ErrOverloaded (and a dead letter) if it refuses, and in its
// turn if the target holds its senders, for as long as ctx allows.
func (s *Silo) atDoor(ctx context.Context, p *partition, env *queues.Envelope, ti *turnInfo) error {
	if env.Request != nil && env.Request.Interleave {
		// A call back on a chain its target waits in: part of the turn
		// under way, which may wait for it — and runs while the turn
		// waits (enqueue: callsBackWaitingTurn). Held at the door, it
		// waited there for the grain's grace, its turn waiting for it, and
		// was refused then; refused at once, it failed that turn
		// (TestACallBackOnTheChainPassesAHeldDoor).
		return nil
	}
	d, ch := p.doorOf(env.Target, env.Hash)
	switch d {
	case 0:
		return nil
	case doorRefuse:
		if !s.refuse(*env, grain.ReasonOverload, nil) {
			return grain.ErrSiloClosed
		}
		return &overloadError{id: env.Target}
	}
	s.backlogWaits.Add(1)
	if ti != nil {
		// Its partition goes, as before any wait; its grain's turn token,
		// if a call holds it until its request is queued, does not: a
		// turn let in now that sent the held grain could come past the
		// door before this send had queued its message once the door let
		// it in (TestAReentrantGrainsAsksThroughAHeldDoorKeepTheirOrder).
		// A held grain's turns run, and make the room — or wait a
		// moment, within a grace (holdgrace.go); a grain whose wait
		// outlasts it refuses at its door.
		ti.w.detach()
	}
	select {
	case <-ch:
		if p.overfull(env.Target, env.Hash) {
			// Let go as its grain's turn was taken for blocked, the
			// backlog full (graceOver): new, so refused, as RejectNewest
			// says — not let in past the limit for having waited.
			if !s.refuse(*env, grain.ReasonOverload, nil) {
				return grain.ErrSiloClosed
			}
			return &overloadError{id: env.Target}
		}
		return nil
	case <-ctx.Done():
		if p.leaveDoor(env.Target, ch) {
			return nil // let in as ctx ended: it goes in
		}
		if !s.refuse(*env, grain.ReasonOverload, nil) {
			return fmt.Errorf("%w: %w", grain.ErrSiloClosed, s.ctxErr(ctx))
		}
		return fmt.Errorf("%w: %s, its backlog full: %w", grain.ErrOverloaded, env.Target, s.ctxErr(ctx))
	}
}
