package silo

import (
	"github.com/granary-go/granary/queues"
)

// A WithMayInterleave kind's grain (not a stateless worker's: a oneHolds
// kind) has one turn at a time that holds its other messages, as Orleans'
// blocking request does: the turn that began while none held — with no
// turn under way, or, once the holder has ended, the first message its
// predicate does not take, let in beside the turns still waiting. The
// turns the predicate let in hold nothing: when the holder ends, the next
// message the predicate does not take goes in beside them, rather than
// wait until no turn is under way — which a stream of let-in turns, each
// waiting in a call, could put off for as long as the stream lasted.
//
// The owner keeps whether a holder runs (actExtra.holding), and each turn
// whether it holds (worker.holding), which its calls carry into the wait
// shard (waitCall.holds) for the deadlock walk: what waits at such a grain
// waits for its holder alone (waitShard.placeCalls).

// beginHolding records that a turn holding a's other messages begins.
// Owner only.
func (a *act) beginHolding() {
	// A grain with an extra record ends its turns in finish, which ends
	// the hold, not in finishPlain.
	a.extra().holding = true
}

// endHolding records that a's holding turn has ended (or that a is gone).
// Owner only.
func (a *act) endHolding() {
	if x := a.x.Load(); x != nil {
		x.holding = false
	}
}

// holds reports whether a turn holding a's other messages is under way.
// Owner only.
func (a *act) holds() bool {
	x := a.x.Load()
	return x != nil && x.holding
}

// mayHold reports whether a message to a that its kind's predicate does not
// take may go in now, beside a's turns, to hold its other messages: a is
// of a oneHolds kind, no turn holds it, and it lets messages in (a turn
// waits; not activating, stopping or on its way out). The bound on
// interleaved turns (interleaveRoom) does not apply: one turn at a time
// holds a, so it passes the bound by one at most, and what waits at a
// waits for its holder alone, as the deadlock walk reads it — held back
// for room, an ask from a turn waited for turns that may wait for its
// caller, a deadlock the walk did not see (bench/chaos -backlog 3).
func (p *partition) mayHold(a *act) bool {
	return a.k.oneHolds && a.busy() && !a.holds() && p.open(a)
}

// interleaveHolding lets env in beside a's turns as the turn that holds
// a's other messages, and reports whether it did: an ask whose caller has
// gone, or a stale tick, is dropped instead (interleaveAs), and holds
// nothing.
func (p *partition) interleaveHolding(a *act, env queues.Envelope) bool {
	return p.interleaveAs(a, env, true)
}
