package activation

import "github.com/granary-go/granary/queues"

// Mailbox is a FIFO of envelopes waiting for their grain's turn: a ring buffer
// that grows by doubling and never shrinks below its first size, so a grain
// that receives bursts does not reallocate on every burst. The zero Mailbox is
// empty and ready to use.
type Mailbox struct {
	buf  []queues.Envelope
	head int
	n    int
}

// Len returns the number of queued envelopes.
func (m *Mailbox) Len() int { return m.n }

// Push appends e.
func (m *Mailbox) Push(e queues.Envelope) {
	if m.n == len(m.buf) {
		m.grow()
	}
	m.buf[(m.head+m.n)%len(m.buf)] = e
	m.n++
}

// Pop removes and returns the oldest envelope.
func (m *Mailbox) Pop() (queues.Envelope, bool) {
	if m.n == 0 {
		return queues.Envelope{}, false
	}
	e := m.buf[m.head]
	m.buf[m.head] = queues.Envelope{} // release the message for the GC
	m.head = (m.head + 1) % len(m.buf)
	m.n--
	if m.n == 0 {
		m.head = 0
	}
	return e, true
}

// PopNewest removes and returns the newest envelope.
func (m *Mailbox) PopNewest() (queues.Envelope, bool) {
	if m.n == 0 {
		return queues.Envelope{}, false
	}
	i := (m.head + m.n - 1) % len(m.buf)
	e := m.buf[i]
	m.buf[i] = queues.Envelope{}
	m.n--
	return e, true
}

// Peek returns the oldest envelope without removing it.
func (m *Mailbox) Peek() (*queues.Envelope, bool) {
	if m.n == 0 {
		return nil, false
	}
	return &m.buf[m.head], true
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

func (m *Mailbox) grow() {
	size := 2 * len(m.buf)
	if size == 0 {
		size = 4
	}
	buf := make([]queues.Envelope, size)
	for i := 0; i < m.n; i++ {
		buf[i] = m.buf[(m.head+i)%len(m.buf)]
	}
	m.buf, m.head = buf, 0
}
