package activation

import (
	"math/bits"
	"sync"

	"github.com/granary-go/granary/queues"
)

// Spares keeps the buffers of mailboxes that emptied for the next backlog
// of any mailbox that shares it (PushWith, PopWith, DrainWith). A grain
// whose turns wait — on a call, in an Await — collects a backlog and drains
// it again and again; each time its mailbox grew a ring from 2 envelopes to
// what it held and let it go as it emptied: a burst of 100 tells to a busy
// grain allocated 22 KB, 250 bytes a message (BenchmarkTellBurstToBusyGrain).
//
// A spare is kept in a sync.Pool by its size, so the GC takes what waits
// unused through two cycles — a silo's spares are as large as its recent
// backlogs, not its largest ever — and a mailbox takes the smallest ring
// it needs, growing into the next size as it fills. The zero Spares is
// ready to use; a nil *Spares keeps nothing. Safe for concurrent use, though
// each mailbox is still used by one goroutine at a time.
type Spares struct {
	sizes [spareSizes]sync.Pool // *ring with its buffer, by log2(len)-1: 2 to segLen envelopes
}

// spareSizes is the number of ring sizes: 2, 4, … segLen.
const spareSizes = 8

// first returns an empty ring for a mailbox's first envelope: the smallest
// size, a spare or new.
func (sp *Spares) first() *ring {
	if r := sp.take(2); r != nil {
		return r
	}
	return &ring{buf: make([]queues.Envelope, 2)}
}

// take returns a spare ring of n envelopes (a power of two, 2 to segLen),
// empty and alone, or nil if sp has none.
func (sp *Spares) take(n int) *ring {
	if sp == nil {
		return nil
	}
	r, _ := sp.sizes[bits.TrailingZeros(uint(n))-1].Get().(*ring)
	return r
}

// put keeps r, emptied, for a later take. Its buffer holds no message:
// each place was cleared as its envelope left.
func (sp *Spares) put(r *ring) {
	if sp == nil {
		return
	}
	r.head, r.n, r.next, r.tail, r.idx = 0, 0, nil, nil, 0
	sp.sizes[bits.TrailingZeros(uint(len(r.buf)))-1].Put(r)
}
