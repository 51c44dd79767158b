package activation

import "github.com/granary-go/granary/queues"

// Mailbox is a FIFO of envelopes waiting for their grain's turn. Most grains
// never have one waiting (a message for an idle grain runs at once), so the
// zero Mailbox is one nil pointer; its buffer is allocated on the first
// Push and let go when the mailbox empties, so an idle grain holds no
// buffer. Not safe for concurrent use: its partition's owner alone uses it.
//
// A backlog of up to segLen envelopes is a ring that grows by doubling; a
// longer one goes on in segments of segLen, linked, so that a flood's
// backlog of thousands never grows by copying. A doubling ring copied the
// whole backlog at each power of two, with the GC's write barrier on every
// pointer in it and, from a megabyte on, a fresh large allocation that
// starts a GC cycle: the owner of a grain sent 10,000 tells stood still
// 4–10 ms at the copy at 8,192 — its whole partition with it — and the
// first ask to a neighbour of the flood waited 13–28 ms
// (TestAFloodsBacklogDoesNotStallItsPartition measures the pause's
// cause, BenchmarkMailboxFill the cost).
type Mailbox struct {
	r *ring
}

// segLen is the longest the first ring grows, and the length of each
// further segment: 256 envelopes of 88 bytes, 22.5 KB, an allocation of
// the heap's small size classes (up to 32 KB) rather than a large one.
const segLen = 256

type ring struct {
	buf  []queues.Envelope // the oldest envelopes, a ring of up to segLen
	head int
	n    int  // envelopes in buf
	more *seg // the envelopes after buf's, oldest first, once buf filled at segLen
	last *seg
	len  int // envelopes in all
}

// seg is a segment of a long backlog: filled from e[0] on, emptied from
// e[head] on.
type seg struct {
	e    []queues.Envelope // len segLen
	head int
	n    int
	next *seg
}

// Len returns the number of queued envelopes.
func (m *Mailbox) Len() int {
	if m.r == nil {
		return 0
	}
	return m.r.len
}

// Push appends e.
func (m *Mailbox) Push(e queues.Envelope) {
	if m.r == nil {
		m.r = &ring{buf: make([]queues.Envelope, 2)}
	}
	r := m.r
	r.len++
	if r.more == nil {
		if r.n == len(r.buf) && len(r.buf) < segLen {
			r.grow()
		}
		if r.n < len(r.buf) {
			r.buf[(r.head+r.n)%len(r.buf)] = e
			r.n++
			return
		}
	}
	s := r.last
	if s == nil || s.head+s.n == segLen {
		s = &seg{e: make([]queues.Envelope, segLen)}
		if r.last == nil {
			r.more = s
		} else {
			r.last.next = s
		}
		r.last = s
	}
	s.e[s.head+s.n] = e
	s.n++
}

// Pop removes and returns the oldest envelope.
func (m *Mailbox) Pop() (queues.Envelope, bool) {
	if m.r == nil || m.r.len == 0 {
		return queues.Envelope{}, false
	}
	r := m.r
	if r.n == 0 {
		// buf is done with: the first segment takes its place, a ring
		// whose envelopes start at its head (it fills no further while
		// segments follow it: Push appends to the last).
		s := r.more
		r.buf, r.head, r.n = s.e, s.head, s.n
		r.more = s.next
		if r.more == nil {
			r.last = nil
		}
	}
	e := r.buf[r.head]
	r.buf[r.head] = queues.Envelope{} // release the message for the GC
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.len--
	if r.len == 0 {
		m.r = nil
	}
	return e, true
}

// Drain removes every envelope, oldest first, calling f for each.
func (m *Mailbox) Drain(f func(queues.Envelope)) {
	for {
		e, ok := m.Pop()
		if !ok {
			return
		}
		f(e)
	}
}

func (r *ring) grow() {
	buf := make([]queues.Envelope, 2*len(r.buf))
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}
