package activation

import "github.com/granary-go/granary/queues"

// Mailbox is a FIFO of envelopes waiting for their grain's turn. Most grains
// never have one waiting (a message for an idle grain runs at once), so the
// zero Mailbox is one nil pointer; its ring buffer is allocated on the first
// Push, grows by doubling, and is let go when the mailbox empties, so an idle
// grain holds no buffer.
type Mailbox struct {
	r *ring
}

type ring struct {
	buf  []queues.Envelope
	head int
	n    int
}

// Len returns the number of queued envelopes.
func (m *Mailbox) Len() int {
	if m.r == nil {
		return 0
	}
	return m.r.n
}

// Push appends e.
func (m *Mailbox) Push(e queues.Envelope) {
	if m.r == nil {
		m.r = &ring{buf: make([]queues.Envelope, 2)}
	}
	r := m.r
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
}

// Pop removes and returns the oldest envelope.
func (m *Mailbox) Pop() (queues.Envelope, bool) {
	if m.r == nil || m.r.n == 0 {
		return queues.Envelope{}, false
	}
	r := m.r
	e := r.buf[r.head]
	r.buf[r.head] = queues.Envelope{} // release the message for the GC
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
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
