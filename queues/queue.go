package queues

import (
	"errors"
	"sync"
)

// Errors returned by Push.
var (
	// ErrClosed: the message lane is closed.
	ErrClosed = errors.New("granary: queue closed")
	// ErrFull: the message lane holds its limit.
	ErrFull = errors.New("granary: queue full")
)

// Queue is a multi-producer, single-consumer queue with two lanes: a control
// lane of C, always drained first, and a message lane of T. Producers append
// under a mutex held for a few instructions; the consumer swaps the lanes out
// whole, so it takes every queued item in one lock acquisition (batch
// draining), and hands the emptied slices back for reuse, so a steady state
// allocates nothing.
//
// Queue is safe for concurrent use by many producers and one consumer.
type Queue[T, C any] struct {
	mu     sync.Mutex
	items  []T
	ctl    []C
	closed bool
	limit  int
	wake   chan struct{}
}

// New returns an empty queue whose message lane holds at most limit items
// (no limit if limit <= 0). The control lane has no limit: it carries the
// runtime's own bounded traffic.
func New[T, C any](limit int) *Queue[T, C] {
	return &Queue[T, C]{wake: make(chan struct{}, 1), limit: limit}
}

// Push appends v to the message lane, or fails with ErrClosed or ErrFull.
func (q *Queue[T, C]) Push(v T) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if q.limit > 0 && len(q.items) >= q.limit {
		q.mu.Unlock()
		return ErrFull
	}
	signal := len(q.items) == 0 && len(q.ctl) == 0
	q.items = append(q.items, v)
	q.mu.Unlock()
	if signal {
		q.signal()
	}
	return nil
}

// PushControl appends c to the control lane, which the consumer drains ahead
// of the message lane. The control lane never closes: the runtime's own
// messages (a finished turn, a timer) must reach the consumer until it stops.
func (q *Queue[T, C]) PushControl(c C) {
	q.mu.Lock()
	signal := len(q.items) == 0 && len(q.ctl) == 0
	q.ctl = append(q.ctl, c)
	q.mu.Unlock()
	if signal {
		q.signal()
	}
}

func (q *Queue[T, C]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Wake returns a channel that receives after a push to an empty queue. The
// consumer waits on it when Drain returned nothing. A wake-up may be
// spurious; none is lost.
func (q *Queue[T, C]) Wake() <-chan struct{} { return q.wake }

// Drain takes every queued item. items and ctl are emptied slices that become
// the queue's new lanes (pass back the previous results, cleared, to reuse
// their arrays).
func (q *Queue[T, C]) Drain(items []T, ctl []C) ([]T, []C) {
	q.mu.Lock()
	gotItems, gotCtl := q.items, q.ctl
	q.items, q.ctl = items[:0], ctl[:0]
	q.mu.Unlock()
	return gotItems, gotCtl
}

// Len returns the number of queued messages and control items.
func (q *Queue[T, C]) Len() int {
	q.mu.Lock()
	n := len(q.items) + len(q.ctl)
	q.mu.Unlock()
	return n
}

// Close makes further Push calls fail with ErrClosed. Items already queued
// stay for Drain; PushControl still works.
func (q *Queue[T, C]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}
