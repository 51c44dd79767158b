package silo

import (
	"context"
	"math/rand/v2"

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
func (s *Silo) pickWorker(k *kind, base int) *partition {
	n := k.workers
	best := s.workerPart(base, 0)
	least := best.load()
	rest := n - 1
	from := int(rand.Uint64() % uint64(rest))
	for i := range min(rest, pickOf-1) { // distinct partitions: n is at most their count
		p := s.workerPart(base, 1+(from+i)%rest)
		if l := p.load(); l < least {
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

// load is a sender's estimate of how busy p is for a stateless worker: the
// messages to stateless workers pushed to it and not yet delivered, the
// turns of stateless grains running in it (a blocked one among them,
// handed off), and the messages of any grain waiting behind a busy turn; a
// partition where a stateless identity is quarantined comes after all the
// others. Whether the owner is parked is left out on purpose: an owner that
// has just answered a call has not parked yet, and the next call would go
// to a second activation though the first is free.
func (p *partition) load() int64 {
	l := p.swQueued.Load() + p.swBusy.Load() + p.backlog.Load()
	if p.swSick.Load() > 0 {
		l += sickLoad
	}
	return l
}

// unquarantine ends id's quarantine; k is id's kind.
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

func (p *partition) unquarantine(id grain.ID, k *kind) {
	delete(p.quarantine, id)
	if k.workers > 1 {
		p.swSick.Add(-1)
	}
}

// sickLoad is what a quarantined stateless identity adds to its
// partition's load: more than any backlog, so that while one of an
// identity's activations is quarantined its messages go to the others, if
// any is well (the count is per partition, not per identity: another
// stateless identity there avoids it too, for as long).
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
