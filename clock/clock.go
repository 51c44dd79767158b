// Package clock is the time source of a silo: the real clock by default, or a
// Manual clock that tests advance by hand, so that idle deactivation, restart
// backoff, quarantine and timers are deterministic under test.
//
// Concurrency: both clocks are safe for concurrent use.
package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	// Now returns the current time. The silo only ever subtracts two readings,
	// so the real clock's monotonic reading is what counts.
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or in the goroutine that
	// advances the clock (Manual) once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened; it reports whether it did.
	Stop() bool
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Since reads only the monotonic clock, about half the cost of Now, which
// also reads the wall clock.
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }

// Sincer is implemented by a Clock that can tell the time passed since one
// of its readings more cheaply than Now().Sub(t). Since uses it.
type Sincer interface {
	Since(t time.Time) time.Duration
}

// Since returns the time c has moved since t, a reading of c.
func Since(c Clock, t time.Time) time.Duration {
	if s, ok := c.(Sincer); ok {
		return s.Since(t)
	}
	return c.Now().Sub(t)
}
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}

// Manual is a clock that moves only when Advance is called. The zero value
// starts at the zero time; NewManual picks a start.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers manualHeap
	seq    uint64
}

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc schedules f for when the clock has been advanced by d. A d <= 0
// fires at the next Advance; a nil f fires and calls nothing.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &manualTimer{m: m, at: m.now.Add(d), f: f, seq: m.seq, index: -1}
	heap.Push(&m.timers, t)
	return t
}

// Advance moves the clock forward by d, calling, in time order, every
// function that falls due, each with the clock set to its due time. A function
// scheduled by another during the advance runs too if it falls due. The
// clock never goes back: a negative d counts as 0 (a silo's idle deadlines,
// backoffs and quarantines are offsets on it), and an Advance that ends
// after another one moved the clock further — from a function it called, or
// from another goroutine — leaves the clock where that one put it.
func (m *Manual) Advance(d time.Duration) {
	d = max(d, 0)
	m.mu.Lock()
	end := m.now.Add(d)
	for len(m.timers) > 0 && !m.timers[0].at.After(end) {
		t := heap.Pop(&m.timers).(*manualTimer)
		if t.at.After(m.now) {
			m.now = t.at
		}
		m.mu.Unlock()
		if t.f != nil {
			t.f()
		}
		m.mu.Lock()
	}
	if end.After(m.now) {
		m.now = end
	}
	m.mu.Unlock()
}

// Pending returns the number of scheduled functions not yet called.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

type manualTimer struct {
	m     *Manual
	at    time.Time
	f     func()
	seq   uint64
	index int
}

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.m.timers, t.index)
	return true
}

type manualHeap []*manualTimer

func (h manualHeap) Len() int { return len(h) }
func (h manualHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h manualHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *manualHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *manualHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
