package silo

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// The door: what a sender finds for a grain whose backlog is full, before
// its message goes into the partition queue.
//
// A grain whose turns do not run (blocked in a turn, activating, on its
// way out) and whose backlog is full refuses at the door, by its
// RejectNewest policy: the send fails with ErrOverloaded (backlogFull). A
// grain whose turns run — served, sent messages faster than it handles
// them — makes its senders wait at the door until its backlog has room,
// bounded by their ctx (hold, slice.go): its senders are held back, and no
// other grain's. The partition's queue was held instead, until its backlog
// had room, which held every sender of the partition, and let the grain's
// backlog pass its limit by a queue's worth of messages whenever the hold
// let go (a limit of 1,000 held 17,000 messages).
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
type doorEntry struct {
	shut   door
	budget int
	waited bool // a sender found no budget, and has not been woken since
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
// shut doorWait's. It reports whether a sender waits at a's held door, or
// did until this call let it try again.
func (p *partition) setDoor(a *act, d door, on bool, budget int) (waited bool) {
	p.ovMu.Lock()
	slots := p.ovSlots.Load()
	if slots == nil {
		slots = new(ovSlots)
		p.ovSlots.Store(slots)
	}
	slot := &slots[ovSlot(a.ID.Hash())]
	was := p.ov[a.ID]
	now := was
	now.shut &^= d
	if on {
		now.shut |= d
	}
	if d == doorWait {
		now.budget = budget
	}
	switch {
	case now.shut == 0 && was.shut != 0:
		delete(p.ov, a.ID)
		slot.Add(-1)
	case now.shut != 0 && was.shut == 0:
		p.ov[a.ID] = now
		slot.Add(1)
	default:
		p.ov[a.ID] = now
	}
	if was.shut&doorWait != 0 && was.budget == 0 && (now.shut&doorWait == 0 || now.budget > 0) {
		// Its senders try again (and say so again if they still find no
		// budget). Those of another grain held too wake for nothing, and
		// wait again.
		if p.room != nil {
			close(p.room)
			p.room = nil
		}
		if now.shut != 0 {
			now.waited = false
			p.ov[a.ID] = now
		}
	}
	p.ovN.Store(int32(len(p.ov)))
	p.ovMu.Unlock()
	return was.waited
}

// ovSlots counts a partition's grains with a door shut by a few bits of
// their identity's hash: a sender whose target's slot is empty knows, from
// one atomic load, that its target is not among them, and takes no lock —
// while one hot grain sheds load, the sends to the partition's other
// grains went through the lock every time (BenchmarkTellBesideOverloaded).
type ovSlots [256]atomic.Int32

// ovSlot is the slot of the identity whose hash is h: its top bits, which
// the partition's own choice (h modulo the partitions) leaves spread.
func ovSlot(h uint64) uint64 { return h >> 56 }

// doorOf returns, for a sender, the door of the grain whose identity is
// id, of hash h — 0 if it lets the sender in, taking one of a held
// grain's budget —, and for doorWait the channel that is closed when a
// held grain's door lets more in. It costs an atomic load or two
// unless a grain with a door shut shares its target's slot.
func (p *partition) doorOf(id grain.ID, h uint64) (door, <-chan struct{}) {
	if p.ovN.Load() == 0 {
		return 0, nil
	}
	if slots := p.ovSlots.Load(); slots == nil || slots[ovSlot(h)].Load() == 0 {
		return 0, nil
	}
	p.ovMu.Lock()
	defer p.ovMu.Unlock()
	e := p.ov[id]
	switch {
	case e.shut&doorRefuse != 0:
		return doorRefuse, nil
	case e.shut == 0:
		return 0, nil
	case e.budget > 0:
		e.budget--
		p.ov[id] = e
		return 0, nil
	}
	if !e.waited {
		e.waited = true
		p.ov[id] = e
	}
	if p.room == nil {
		p.room = make(chan struct{})
	}
	return doorWait, p.room
}

// overfull reports whether a sender to id is refused at the door.
func (p *partition) overfull(id grain.ID, h uint64) bool {
	d, _ := p.doorOf(id, h)
	return d == doorRefuse
}

// atDoor passes env's sender through its target's door: at once if it is
// open, with ErrOverloaded (and a dead letter) if it refuses, and once it
// opens if the target holds its senders, for as long as ctx allows.
func (s *Silo) atDoor(ctx context.Context, p *partition, env *queues.Envelope, ti *turnInfo) error {
	counted := false // in Stats().BacklogWaits
	for {
		d, room := p.doorOf(env.Target, env.Hash)
		switch d {
		case 0:
			return nil
		case doorRefuse:
			s.refuse(*env, grain.ReasonOverload, nil)
			return &overloadError{id: env.Target}
		}
		if !counted {
			counted = true
			s.backlogWaits.Add(1)
		}
		if ti != nil {
			ti.w.detach() // the held grain's turns may be its own partition's next
		}
		select {
		case <-room:
		case <-ctx.Done():
			s.refuse(*env, grain.ReasonOverload, nil)
			return fmt.Errorf("%w: %s, its backlog full: %w", grain.ErrOverloaded, env.Target, context.Cause(ctx))
		}
	}
}
