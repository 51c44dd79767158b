package silo

import (
	"context"
	"math/rand/v2"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Stateless workers (WithStatelessWorker): the activations of an identity
// of a stateless kind live in the n partitions that follow its own —
// base, base+1, ... base+n-1, modulo the partition count — at most one in
// each. So every partition's directory still holds one activation per
// identity (the single-activation rule each owner keeps, unchanged), the
// identity's hash stays what it is everywhere inside a partition, and only
// the sender's choice of partition differs.

// workerPart returns the partition of the i-th activation of a stateless
// identity whose own partition is base.
func (s *Silo) workerPart(base, i int) *partition {
	return s.parts[(base+i)%len(s.parts)]
}

// pickWorker chooses where a message to a stateless identity goes: the
// least loaded of up to pickOf of its k.workers (> 1) partitions — the
// identity's first, and the next ones from one drawn at random among the
// rest: a few loads of lines the owners write, where a scan of every
// partition would cost a send a cache miss each. A tie goes to the first
// activation, so that, as in Orleans, an identity has more than one only
// while the first is busy, and one that gets little traffic keeps one.
// rand.Uint64 draws from the running thread's own generator: no lock, no
// shared line.
func (s *Silo) pickWorker(k *kind, base int, h uint64) *partition {
	n := k.workers
	best := s.workerPart(base, 0)
	least := best.load(h)
	rest := n - 1
	from := int(rand.Uint64() % uint64(rest))
	for i := range min(rest, pickOf-1) { // distinct partitions: n is at most their count
		p := s.workerPart(base, 1+(from+i)%rest)
		if l := p.load(h); l < least {
			best, least = p, l
		}
	}
	return best
}

// isSpare reports whether a, an activation of a stateless identity,
// lives outside the identity's own partition: one made while the first
// was busy, which goes sooner when idle (WithSpareIdleTimeout). Owner only;
// a hash a turn, on the turn's way out, only for a stateless kind.
func (p *partition) isSpare(a *act) bool {
	return p.s.locator.LocateHash(a.ID.HashWithKind(a.k.nameHash)).Partition != p.idx
}

// pickOf is how many of a stateless identity's partitions a send compares.
const pickOf = 4

// load is a sender's estimate of how busy p is for a message to the
// stateless identity whose hash is h: the messages to stateless workers
// pushed to it and not yet delivered, the turns of stateless grains
// running in it (a blocked one among them, handed off), and the messages
// of any grain waiting behind a busy turn; a partition where the
// identity's own activation is in a turn off the partition — blocked in a
// call, or slow — comes after every one where it is not (or has none yet,
// and one would be made), and a partition where the identity (or another
// of its bucket) is quarantined after all the others. Whether the
// owner is parked is left out on purpose: an owner that has just answered
// a call has not parked yet, and the next call would go to a second
// activation though the first is free.
//
// The identity's own such turn weighs more than any backlog: counted with the
// rest, the backlog of other grains in the partition where the identity
// had no activation outweighed the one turn of the activation that did —
// a turn blocked in a call — and messages queued behind that turn, for as
// long as it waited. A grain the worker called, calling the identity back,
// waited for it in turn: a deadlock until the call timeout, where an idle
// activation could be made to answer (as Orleans sends a stateless
// worker's message to an activation that is not busy). Identities share
// the counts of a bucket of their hashes; one that shares with a busy
// identity is sent elsewhere for no reason, which costs an activation, not
// a wait.
func (p *partition) load(h uint64) int64 {
	l := p.swQueued.Load() + p.swBusy.Load() + p.backlog.Load()
	if p.swBusyIDs[busyBucket(h)].Load() > 0 {
		l += busyLoad
	}
	if p.swSickIDs[busyBucket(h)].Load() > 0 {
		l += sickLoad
	}
	return l
}

// busyBuckets is how many buckets of identities a partition counts the
// turns of stateless grains in (swBusyIDs): 1 KB a partition.
const busyBuckets = 256

// busyBucket is the bucket of the identity whose hash is h. The low bits:
// the top ones choose the partition (queues.Partitioner), and would put
// the identities of a partition in a few buckets.
func busyBucket(h uint64) uint8 { return uint8(h) }

// busyLoad is what a turn of a stateless identity adds to its partition's
// load for a message to that identity: more than any backlog, less than a
// quarantine.
const busyLoad = 1 << 32

// offPartition counts a turn of a, a stateless worker's activation, in or
// out (n = 1 or -1) of the turns of its identity's bucket (swBusyIDs):
// in where the turn leaves its partition — handed off, blocked in a call
// or slow (worker.detachAt), or run off it from the start (interleave) —
// and out where its outcome comes back (opTurnDone), which every such
// turn's does. A turn run in line is not counted: it ends before the
// owner reads the next message, and counting each — a write senders read,
// on every turn — cost a stateless worker's short turns 7 %. (Its count
// may go below zero for a moment: a turn handed off by the watchdog may
// end, and its outcome be read, before the watchdog counts it in.)
func (p *partition) offPartition(a *act, n int32) {
	p.swBusyIDs[a.bucket()].Add(n)
}

// bucket is the bucket of a's identity (busyBucket); hashed again, as only
// a stateless worker's activations need it, and rarely.
func (a *act) bucket() uint8 { return busyBucket(a.ID.HashWithKind(a.k.nameHash)) }

// inQuarantine reports whether id is quarantined now; one whose quarantine
// is over is let out of it.
func (p *partition) inQuarantine(id grain.ID, k *kind) bool {
	until, q := p.quarantine[id]
	if q && until <= p.now {
		p.unquarantine(id, k)
		return false
	}
	return q
}

// unquarantine ends id's quarantine; k is id's kind.
func (p *partition) unquarantine(id grain.ID, k *kind) {
	delete(p.quarantine, id)
	if k.workers > 1 {
		p.swSickIDs[busyBucket(id.HashWithKind(k.nameHash))].Add(-1)
	}
}

// sickLoad is what a quarantined stateless identity adds to its
// partition's load: more than any backlog, so that while one of an
// identity's activations is quarantined its messages go to the others, if
// any is well (counted by the bucket of the identity's hash, swSickIDs:
// another stateless identity of the bucket avoids it too, for as long;
// counted for the whole partition, as it was, a quarantine anywhere there
// kept every stateless identity's messages from it, and an ask from a
// turn from moving on to it, forwardWorker).
const sickLoad = 1 << 40

// pushWorker is push for a message to a stateless worker, counted in
// p.swQueued until the owner delivers it. The sender counts it up as soon as
// it has chosen p (Tell, Ask: right after admitSend) — not here: between
// the choice and the push, a send may wait (a ctx shared by many callers
// has a mutex; a WithMayInterleave predicate is program code), and every
// send choosing meanwhile would see p as idle and choose it too (64 asks
// went to one busy activation so, under load). So the owner's count down
// never comes first; every message pushed is delivered (partition.deliver)
// or the partition is closing, and one that is not pushed is counted down
// here or by unreserve. The counts are exact: a message that becomes a
// dead letter is counted down where it is delivered, as one that runs.
func (s *Silo) pushWorker(ctx context.Context, p *partition, env *queues.Envelope, ti *turnInfo) (first bool, err error) {
	first, err = s.push(ctx, p, env, ti)
	if err != nil {
		p.swQueued.Add(-1)
	}
	return first, err
}

// forwardWorker moves env, an ask from a grain's turn to a stateless
// identity whose activation a here cannot take it at once — a is in a
// turn, or has messages waiting, or waits out a restart's backoff — on to
// another of the identity's partitions where its activation is in no turn
// off the partition — or has none yet, and one is made — and reports
// whether it did. The sender chose this one when a looked free, or least
// loaded; but a turn of a's, the one under way or one that a message
// queued ahead begins, may wait on the very grain that asks — on a call
// chain of its own, so no cycle on the ask's chain shows it, and a
// stateless worker's waits are not in the deadlock graph (deadlock.go) —
// and the ask, queued behind it, would wait for it until the call timeout
// while another activation could answer at once (as Orleans sends a
// message for a stateless worker to an activation that is not busy).
// Only an ask from a turn can close such a cycle; tells and asks from
// outside wait for a, as the sender chose.
//
// The push does not wait: if the partition chosen has its queue full, or
// closed, or taking only late sends (a Shutdown settling), the ask waits
// here after all. A request is moved at most maxForwards times, so it
// cannot go round for ever among activations that each begin a turn
// before it arrives — but more than once for each other activation: one
// free as the ask was moved away from it may be free again when the ask
// finds the activation it was moved to in a turn (the chaos program that
// found the deadlock, with two partitions: an ask moved once, then held
// at that limit behind the turn waiting for it, while the first
// activation stood free).
//
// A call back on its chain that reaches an activation whose OnDeactivate
// runs — the hook's own call to its identity, or a callee's call back —
// cannot be let in (a grain on its way out lets nothing in) and, queued,
// would wait for the hook that waits for it: it leaves for any other of
// the identity's partitions, the least loaded, even one whose activation
// is in a turn (which may let it in, or take it after), and stays there:
// sent back here, it could be bounced between the two until its moves ran
// out. (A reentrant stateless worker's OnDeactivate that called its own
// identity was sent here by the sender's choice, the other activation
// being in a turn, and waited for its own end until
// Config.DeactivationTimeout.) Other asks wait for the hook as before:
// moving every ask from a turn away from an activation on its way out
// made the several-clients model test, under CPU contention, report more
// often a plain grain activated afresh while its predecessor's
// OnDeactivate had not yet run — which the code before showed too, once
// that test had a reentrant stateless worker (not understood yet).
func (p *partition) forwardWorker(a *act, env *queues.Envelope) bool {
	if p.mode != modeRunning || env.Request.Forwards >= maxForwards {
		return false
	}
	k := a.k
	backIntoHook := env.Request.Interleave && a.State() == activation.Deactivating // see above
	h, b := env.Hash, busyBucket(env.Hash)
	base := p.s.locator.LocateHash(h).Partition
	var best *partition
	var least int64
	for i := range k.workers {
		q := p.s.workerPart(base, i)
		if q == p || q.swSickIDs[b].Load() > 0 || !backIntoHook && q.swBusyIDs[b].Load() > 0 {
			continue
		}
		if l := q.load(h); best == nil || l < least {
			best, least = q, l
		}
	}
	if best == nil {
		return false
	}
	forwards := env.Request.Forwards
	if backIntoHook {
		env.Request.Forwards = maxForwards
	} else {
		env.Request.Forwards++
	}
	best.swQueued.Add(1) // counted before the push, as a sender does
	if best.q.Push(*env) != nil {
		best.swQueued.Add(-1)
		env.Request.Forwards = forwards
		return false
	}
	return true
}

// workerAt returns p if a, one of its activations, is a stateless
// worker's, else nil: where a deadlock walk finds a's wait (closesCycle).
func (p *partition) workerAt(a *act) *partition {
	if a.isWorker() {
		return p
	}
	return nil
}

// maxForwards is how many times an ask may be moved on from one stateless
// activation to another (forwardWorker).
const maxForwards = 8

// unreserve counts down a message to a stateless worker that its sender
// counted up and then did not send.
func unreserve(p *partition, k *kind) {
	if k.workers > 1 {
		p.swQueued.Add(-1)
	}
}

// dedupeWorkers drops the repeats of stateless identities from ids, which
// lists one entry per activation: ActiveGrains names identities.
func (s *Silo) dedupeWorkers(ids []grain.ID) []grain.ID {
	if !s.hasWorkers() {
		return ids // no stateless kind: no repeats, and no lookup per grain
	}
	var seen map[grain.ID]struct{}
	out := ids[:0]
	for _, id := range ids {
		if k := s.kinds[id.Kind()]; k != nil && k.workers > 1 {
			if _, dup := seen[id]; dup {
				continue
			}
			if seen == nil {
				seen = make(map[grain.ID]struct{})
			}
			seen[id] = struct{}{}
		}
		out = append(out, id)
	}
	return out
}

// hasWorkers reports whether a stateless kind is registered.
func (s *Silo) hasWorkers() bool {
	for _, k := range s.kinds {
		if k.workers > 1 {
			return true
		}
	}
	return false
}
