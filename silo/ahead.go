package silo

import (
	"math"

	"github.com/granary-go/granary/queues"
)

// Work under way first. A partition queue is first in, first out, so a
// burst of calls from outside reaches its grains before any call those
// grains make in turn, which queue behind the rest of the burst: the burst
// is answered breadth first, each call waiting for most of it. So an owner
// runs ahead of their place the messages grains sent from their turns —
// the next hops of calls under way — as protoactor's goroutines run each
// call to its answer. Never ahead of a message queued before it for the
// same grain: each grain still sees its messages in the order they were
// pushed, whoever sent them (a client's "joined" before the "moved" its
// next call made a player send); only two grains' messages, which no
// order was ever promised between, may trade places. Nor does a message
// for a grain being stopped leave its place at all: a Stop draws its line
// by places (stoppingFor). `relay` at 40,000
// calls a second, in three sets of alternating runs: the median 404 →
// 322, 394 → 331 and 355 → 263 µs, the p99 even (docs/performance-log.md,
// item 81).
//
// A send from a turn marks its partition (turnSent). The owner, finding
// the mark with more of its batch to read, takes what was queued since
// onto the batch (Queue.DrainAppend) and looks at the next aheadWindow
// messages in order, keeping a bitmap of their targets' hashes: a message
// from a turn whose target no message before it there holds runs at once,
// its slot emptied for the delivery loop to skip; every other message
// marks its target. A bit two grains share only keeps a message in its
// place. Each message is looked at once a batch (aheadScan): a turn that
// tells thousands of grains marks the partition at every send, and the
// owner's looks then cost what its new messages do.

// aheadWindow is how far past the next message the owner looks for
// messages of work under way.
const aheadWindow = 256

// aheadScan is how far the owner has looked into its current batch, and
// the targets of what it saw and left in place.
type aheadScan struct {
	seq  uint64    // the batch's Seq: a new batch starts a new look
	to   int       // the batch's messages up to here (Taken's count) have been looked at
	seen [4]uint64 // bits of their targets' hashes, of those left in place
	// env: the message being run ahead, moved out of its slot. Whatever
	// keeps a message copies it, and its turn reads it only until it begins
	// (runTurn, w.begin), before a handoff could let a new owner look
	// ahead again. Moved into a fresh envelope each, it was the one
	// allocation of such a message (96 bytes; BenchmarkTellReentrantTelling,
	// whose grains tell each other behind a backlog, made one a tell).
	env queues.Envelope
}

// aheadDue reports whether the owner looks ahead now (runAhead): a turn
// sent a message here since its last look, and the batch has a message
// the look could pass — the one after the next before a batch's first
// delivery (a lone message, as two grains bouncing a ball leave, is
// passed by none), the next one after a delivery.
func (p *partition) aheadDue(next int) bool {
	return p.turnSent.Load() && p.batch.Peek(next) != nil
}

// ranAhead reports whether env's slot was emptied because its message ran
// ahead of its place: the delivery loop, closeAll and batchLeft skip it.
func ranAhead(env *queues.Envelope) bool { return env.Msg == nil }

// runAhead runs the messages of work under way that it may ahead of their
// place (see above). It reports false if a turn it ran handed the
// partition off: the caller must stop touching it.
func (p *partition) runAhead(w *worker) bool {
	p.turnSent.Store(false)
	if p.stopsAhead != nil || p.mode != modeRunning || p.s.state.Load() != stateRunning {
		// A Stop read with this batch draws its line by the messages'
		// places; a silo shutting down handles what it has as it comes.
		return true
	}
	if p.q.DrainAppend(&p.batch) && !p.s.realClk { // false: a placed item waits; the batch as it is
		// What it took was sent after the round read the clock, and a
		// test's clock may have moved since by any span: read it again,
		// or a quarantine, an idle clock, a timer set by these messages
		// would count from before they were sent. (The real clock's
		// reading lags by at most a HandoffThreshold: tick.)
		p.now = p.s.since()
	}
	at, sc := p.batch.Taken(), &p.ahead
	if sc.seq != p.batch.Seq() || sc.to <= at {
		*sc = aheadScan{seq: p.batch.Seq(), to: at}
	}
	n := at + aheadWindow - sc.to
	if n <= 0 {
		return true
	}
	owns := true
	p.batch.Ahead(sc.to-at, n, func(env *queues.Envelope) bool {
		sc.to++
		if ranAhead(env) {
			return true
		}
		word, bit := env.Hash>>62, uint64(1)<<(env.Hash>>56&63)
		if sc.seen[word]&bit == 0 && sentByTurn(env) {
			if a, stopping := p.stoppingFor(env); !stopping {
				e := &sc.env
				*e = *env // the slot is emptied before the turn: a new owner skips it
				env.Msg = nil
				if owns = p.deliverGuessed(w, e, a); owns {
					*e = queues.Envelope{} // its message: held no longer than its turn
				}
				return owns
			}
		}
		sc.seen[word] |= bit
		return true
	})
	return owns
}

// stoppingFor returns env's grain's activation, if the guess finds it, and
// whether it is being stopped. A message for a grain being stopped keeps
// its place: a Stop read with this batch draws its line by the messages'
// places (stopRequested), and one run ahead would be judged by the place
// of the message delivered last — a call sent after the Stop, from a turn,
// taken for one sent before it and failed as stopped.
func (p *partition) stoppingFor(env *queues.Envelope) (*act, bool) {
	a := p.dir.Guess(env.Hash)
	if a != nil && !a.ID.Equal(&env.Target) { // another identity of the same hash
		a, _ = p.dir.Get(env.Target, env.Hash)
	}
	// Not active, a is nil: a Stop's line for such a grain is stopsAhead's,
	// and runAhead runs nothing while there is one.
	return a, a != nil && a.isStopping()
}

// batchLeft returns how many messages the current batch has left to
// deliver: not the slots emptied by messages that ran ahead of them.
func (p *partition) batchLeft() int {
	n := 0
	p.batch.Ahead(0, math.MaxInt, func(env *queues.Envelope) bool {
		if !ranAhead(env) {
			n++
		}
		return true
	})
	return n
}

// sentByTurn reports whether a grain sent env from one of its turns.
func sentByTurn(env *queues.Envelope) bool {
	return env.Meta != nil && env.Meta.Tick == nil && !env.Meta.Sender.IsZero()
}
