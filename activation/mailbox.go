package activation

import "github.com/granary-go/granary/queues"

// Mailbox is a FIFO of envelopes waiting for their grain's turn. Most grains
// never have one waiting (a message for an idle grain runs at once), so the
// zero Mailbox is one nil pointer; its buffer is allocated on the first
// Push and let go when the mailbox empties, so an idle grain holds no
// buffer — or, with PushWith and PopWith, taken from and given back to the
// Spares the mailboxes of a silo share, so that a backlog that comes and
// goes allocates none. Not safe for concurrent use: its partition's owner
// alone uses it.
//
// A backlog of up to segLen envelopes is one ring that grows by doubling;
// a longer one goes on in further rings of segLen, chained, so that a
// flood's backlog of thousands never grows by copying. A ring that kept
// doubling copied the whole backlog at each power of two, with the GC's
// write barrier on every pointer in it, and from a megabyte on made a
// large allocation that starts a GC cycle: the owner of a grain sent
// 10,000 tells stood still 4–10 ms at the copy at 8,192 — its whole
// partition with it — and the first ask to a neighbour of the flood
// waited 11–35 ms, now 8–14 (the flood's first time slice). Filling and
// emptying 10,000 envelopes allocates 1.0 MB, not 2.9, in 0.4 of the time
// (TestALongBacklogGrowsWithoutCopying, BenchmarkMailboxFill).
type Mailbox struct {
	r *ring
}

// segLen is the longest the first ring grows, and the length of each
// further ring: 256 envelopes of 88 bytes, 22.5 KB, an allocation of the
// heap's small size classes (up to 32 KB) rather than a large one.
const segLen = 256

// ring is a ring buffer of envelopes, its length a power of two (2 to
// segLen), so that an index wraps with a mask rather than a division. A
// long backlog is a chain of rings: the first is emptied from its head,
// the last filled, and those between are full. Each ring of a chain points
// at the chain's tail, so that Pop need only step to the next ring — and
// is small enough to inline (a call, returning an 88-byte envelope, cost
// a mailbox's turn more than the rest of Pop).
type ring struct {
	buf  []queues.Envelope
	head int
	n    int
	next *ring  // the ring after this one, nil for the last
	tail *chain // nil while the ring is alone
	idx  int    // the ring's place in its chain
}

// chain is what the rings of a long backlog share: which is the last.
type chain struct{ last *ring }

// Len returns the number of queued envelopes.
func (m *Mailbox) Len() int {
	r := m.r
	if r == nil {
		return 0
	}
	if r.tail == nil || r.tail.last == r {
		return r.n
	}
	l := r.tail.last
	return r.n + (l.idx-r.idx-1)*segLen + l.n
}

// Push appends e.
func (m *Mailbox) Push(e queues.Envelope) { m.PushWith(e, nil) }

// PushWith appends e, taking the buffers it needs from sp where sp has them
// (a nil sp has none).
func (m *Mailbox) PushWith(e queues.Envelope, sp *Spares) {
	r := m.r
	if r == nil {
		r = sp.first()
		m.r = r
	}
	l := r
	if r.tail != nil {
		l = r.tail.last
	}
	if l.n == len(l.buf) {
		if l == r && len(r.buf) < segLen {
			r.grow(sp)
		} else {
			l = r.append(l, sp)
		}
	}
	l.buf[(l.head+l.n)&(len(l.buf)-1)] = e
	l.n++
}

// longRing is a ring of a chain with its buffer: one allocation (24 KB, the
// size class its buffer alone takes), not two.
type longRing struct {
	ring
	arr [segLen]queues.Envelope
}

// append adds a ring after l, the last of r's chain (r alone, it starts
// one), and returns it.
func (r *ring) append(l *ring, sp *Spares) *ring {
	if r.tail == nil {
		r.tail = &chain{last: r}
	}
	x := sp.take(segLen)
	if x == nil {
		lr := &longRing{}
		x = &lr.ring
		x.buf = lr.arr[:]
	}
	x.tail, x.idx = r.tail, l.idx+1
	l.next, r.tail.last = x, x
	return x
}

// Pop removes and returns the oldest envelope.
func (m *Mailbox) Pop() (e queues.Envelope, ok bool) { return m.PopWith(nil) }

// PopWith removes and returns the oldest envelope, and leaves each buffer it
// empties with sp for the next backlog (a nil sp lets it go).
func (m *Mailbox) PopWith(sp *Spares) (e queues.Envelope, ok bool) {
	r := m.r
	if r == nil { // an empty mailbox holds no ring
		return e, false
	}
	e, r.buf[r.head] = r.buf[r.head], queues.Envelope{} // release the message for the GC
	r.head = (r.head + 1) & (len(r.buf) - 1)
	if r.n--; r.n == 0 {
		m.r = r.next // nil once the last ring is empty
		sp.put(r)
	}
	return e, true
}

// PopFirst removes and returns the oldest envelope that keep does not keep,
// leaving those before it in place and in their order; ok is false, and
// nothing is removed, if keep keeps them all. It takes time in proportion
// to the envelopes kept ahead of the one removed: a runtime keeps a few
// (a grain's timer ticks, which belong to their timers), not a backlog.
func (m *Mailbox) PopFirst(keep func(*queues.Envelope) bool) (e queues.Envelope, ok bool) {
	n, i := m.Len(), 0
	for i < n && keep(m.slot(i)) {
		i++
	}
	if i == n {
		return e, false
	}
	e = *m.slot(i)
	for j := i; j > 0; j-- { // those kept move up one place, over it
		*m.slot(j) = *m.slot(j - 1)
	}
	m.Pop() // the first place, now a copy of what moved up
	return e, true
}

// Find returns the oldest envelope that match matches, in its place (valid
// until the mailbox next changes), or nil if none does. It takes time in
// proportion to the envelopes ahead of it: a runtime looks for one rarely
// (an ask a deadlock walk looks at again), not as messages flow.
func (m *Mailbox) Find(match func(*queues.Envelope) bool) *queues.Envelope {
	for r := m.r; r != nil; r = r.next {
		for i := range r.n {
			if e := &r.buf[(r.head+i)&(len(r.buf)-1)]; match(e) {
				return e
			}
		}
	}
	return nil
}

// slot returns the place of the envelope i places from the oldest, i < Len.
// The rings after the first are filled from their start, the first
// emptied from its head.
func (m *Mailbox) slot(i int) *queues.Envelope {
	r := m.r
	for i >= r.n {
		i -= r.n
		r = r.next
	}
	return &r.buf[(r.head+i)&(len(r.buf)-1)]
}

// Drain removes every envelope, oldest first, calling f for each.
func (m *Mailbox) Drain(f func(queues.Envelope)) { m.DrainWith(f, nil) }

// DrainWith is Drain leaving the buffers it empties with sp, as PopWith.
func (m *Mailbox) DrainWith(f func(queues.Envelope), sp *Spares) {
	for {
		e, ok := m.PopWith(sp)
		if !ok {
			return
		}
		f(e)
	}
}

// grow doubles the first ring's buffer. A spare of the size wanted gives
// its buffer for the one outgrown, which goes to sp in its place.
func (r *ring) grow(sp *Spares) {
	n := 2 * len(r.buf)
	x := sp.take(n)
	var buf []queues.Envelope
	if x != nil {
		buf = x.buf
	} else {
		buf = make([]queues.Envelope, n)
	}
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	old := r.buf
	r.buf, r.head = buf, 0
	if x != nil {
		clear(old) // the messages now in buf, for the GC
		x.buf = old
		sp.put(x)
	}
}
