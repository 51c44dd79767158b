package silo

import (
	"math/rand/v2"

	"github.com/granary-go/granary/grain"
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

// pickWorker chooses where a message to a stateless identity goes: of two
// of its k.workers (> 1) partitions drawn at random, the less loaded (the
// power of two choices, which keeps the worst load near the mean at the
// cost of two reads). The two are distinct, so that with two workers a
// message always goes to the less loaded. rand.Uint64 draws from the
// running thread's own generator: no lock, no shared line.
func (s *Silo) pickWorker(k *kind, base int) *partition {
	n := uint64(k.workers)
	r := rand.Uint64()
	i := r % n
	j := (i + 1 + (r>>32)%(n-1)) % n
	a, b := s.workerPart(base, int(i)), s.workerPart(base, int(j))
	if b.load() < a.load() {
		return b
	}
	return a
}

// load is a sender's cheap estimate of how busy p is: the messages waiting
// in its grains' mailboxes behind busy turns, then whether its owner is at
// work rather than parked waiting for some. A parked owner is no proof of
// an idle partition: a turn that blocked was handed off, and its grain's
// messages wait while the partition's next owner has nothing else to do.
func (p *partition) load() int64 {
	l := 2 * p.backlog.Load()
	if !p.parked.Load() {
		l++
	}
	return l
}

// dedupeWorkers drops the repeats of stateless identities from ids, which
// lists one entry per activation: ActiveGrains names identities.
func (s *Silo) dedupeWorkers(ids []grain.ID) []grain.ID {
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
