package silo

import "github.com/granary-go/granary/activation"

// Time slices: a grain sent a flood of messages shares its partition with
// the partition's other grains, as Orleans' scheduler runs an activation's
// messages for a quantum and then the next activation's.
//
// A message for an idle grain runs as its owner comes to it in the queue
// (enqueue), which is what makes a tell cheap. Left at that, a flood of
// messages to one grain — thousands sent in a loop, each turn doing some
// work — ran turn after turn while everything its partition was sent
// behind the flood waited for all of it (2,000 turns of 200 µs: an ask to
// another grain of the partition waited 0.4 s; TestAFloodToOneGrainHolds
// ItsPartitionASliceNotTheWholeFlood). So a round has a slice: once the
// handoff monitor has looked sliceLooks times since the round began
// delivering (one to two HandoffThresholds: 5–10 ms by default), a message
// for a grain that already ran a turn this round waits in its mailbox, the
// grain ready, instead of running then; the other grains' messages still
// run as they come, and the ready grains then take their steps in turn —
// the flood's grain one message a step — for a slice of their own
// (runReady). The flood's backlog counts against the grain's backlog limit
// from then on, as any backlog does (WithMaxBacklog).
//
// The monitor's looks are the clock: reading one is an atomic load, and
// only a grain's second message in a round pays it. The monitor looks on
// real time while any owner is awake, so a round that takes its time is
// sliced, whatever clock the silo's grains see.

// sliceLooks is how many of the monitor's looks a round's deliveries, and
// then its ready grains' steps, run for before they yield to what waits.
const sliceLooks = 2

// sliceOver reports whether the monitor has looked sliceLooks times since
// its looks numbered at.
func (p *partition) sliceOver(at uint32) bool {
	return p.s.dog.looks.Load()-at >= sliceLooks
}

// served reports whether a's turns run as the partition comes to them — it
// is active, no turn of it runs or waits, and it is not on its way out — so
// a backlog it has is one it works down, a step a round or more.
func (p *partition) served(a *act) bool {
	return p.mode == modeRunning && a.State() == activation.Active && !a.busy() &&
		!a.wantsDeactivate() && !a.isStopping()
}

// hold stops the partition taking messages from its queue while a, served
// but sent messages faster than it handles them, has a full backlog. A
// grain that ran each message as it came kept up by holding the partition
// — the queue filled behind it and its senders waited for room; sliced, it
// shares the partition and builds a backlog instead, and refusing what
// comes next (RejectNewest) or dropping what came first (DropOldest) would
// lose messages the same program never lost before: a loop of 300,000
// tells to a counter, under the race detector, was refused at its
// 10,000th. So its senders still wait for room in the queue, bounded by
// their ctx, while the partition's grains work through what it took; a
// grain whose turns do not run — one blocked in a turn, or deactivating —
// overflows by its policy instead (backlogFull).
func (p *partition) hold(a *act) {
	for _, h := range p.holders {
		if h == a {
			return
		}
	}
	p.holders = append(p.holders, a)
}

// holding drops the holds whose grains have room in their backlog again,
// or are no longer served (its turn blocks: it may be waiting for a
// message in the queue; or it goes), and reports whether one remains:
// then the owner takes only its control items from the queue.
func (p *partition) holding() bool {
	kept := p.holders[:0]
	for _, a := range p.holders {
		if p.served(a) && a.Mailbox.Len() >= a.k.maxBacklog {
			kept = append(kept, a)
		}
	}
	clear(p.holders[len(kept):])
	p.holders = kept
	return len(kept) > 0
}
