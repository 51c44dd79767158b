package idle

import (
	"fmt"
	"math"
	"time"

	"github.com/granary-go/granary/grain"
)

// DefaultSlots is the number of slots used when NewWheel is given 0.
const DefaultSlots = 512

// MaxSlots is the most slots a wheel may have: 16 M slots are 512 MB.
const MaxSlots = 1 << 24

// Entry is one tracked item, embedded or allocated once per activation.
// The zero Entry is untracked.
type Entry[T any] struct {
	Value      T
	deadline   time.Duration
	prev, next *Entry[T] // nil when not filed
}

// Deadline returns the entry's deadline.
func (e *Entry[T]) Deadline() time.Duration { return e.deadline }

// Tracked reports whether the entry is filed in a wheel.
func (e *Entry[T]) Tracked() bool { return e.prev != nil }

// Wheel is a hashed timing wheel of entries. See the package doc. The zero
// Wheel is not usable; make one with NewWheel.
type Wheel[T any] struct {
	quantum time.Duration
	size    int        // the number of slots
	slots   []Entry[T] // sentinel heads of circular lists; nil until an entry is first filed
	cursor  int64      // last tick processed
	n       int
}

// NewWheel returns a wheel with the given tick length and number of slots
// (DefaultSlots if 0). now is the current time offset.
func NewWheel[T any](quantum time.Duration, slots int, now time.Duration) (*Wheel[T], error) {
	if quantum <= 0 {
		return nil, fmt.Errorf("%w: idle wheel quantum %v (must be > 0)", grain.ErrInvalidConfig, quantum)
	}
	if slots == 0 {
		slots = DefaultSlots
	}
	if slots < 1 || slots > MaxSlots {
		return nil, fmt.Errorf("%w: idle wheel of %d slots (1 to %d)", grain.ErrInvalidConfig, slots, MaxSlots)
	}
	// The slots are made when the first entry is filed: a silo has a wheel
	// per partition, and 512 slot heads are 16 KB — a price for partitions
	// that hold grains, not for every one of a silo configured with many.
	w := &Wheel[T]{quantum: quantum, size: slots}
	w.cursor = int64(now / quantum)
	return w, nil
}

// alloc makes the slots.
func (w *Wheel[T]) alloc() {
	w.slots = make([]Entry[T], w.size)
	for i := range w.slots {
		h := &w.slots[i]
		h.prev, h.next = h, h
	}
}

// Len returns the number of tracked entries.
func (w *Wheel[T]) Len() int { return w.n }

// Touch sets e's deadline and tracks e if it is not tracked yet. Moving a
// deadline later costs a store; moving it earlier than the slot it is filed in
// re-files it (O(1)).
func (w *Wheel[T]) Touch(e *Entry[T], deadline time.Duration) {
	if e.prev == nil {
		e.deadline = deadline
		w.file(e)
		w.n++
		return
	}
	old := e.deadline
	e.deadline = deadline
	if deadline >= old {
		return // the hot path: found again, and re-filed, when its slot comes up
	}
	if w.tick(deadline) < w.tick(old) {
		w.unlink(e)
		w.file(e)
	}
}

// Remove stops tracking e. Removing an untracked entry does nothing.
func (w *Wheel[T]) Remove(e *Entry[T]) {
	if e.prev == nil {
		return
	}
	w.unlink(e)
	w.n--
}

// Each calls f for every tracked entry, in no particular order, until f
// returns false. f must not Touch or Remove entries. It costs a visit of
// every slot and entry: for the rare pass over all of them (shedding under
// memory pressure), not for every tick.
func (w *Wheel[T]) Each(f func(*Entry[T]) bool) {
	for i := range w.slots {
		h := &w.slots[i]
		for e := h.next; e != h; e = e.next {
			if !f(e) {
				return
			}
		}
	}
}

// Advance moves the wheel to now and appends to expired, and stops tracking,
// every entry whose deadline is at or before now's tick. It returns expired.
func (w *Wheel[T]) Advance(now time.Duration, expired []*Entry[T]) []*Entry[T] {
	to := int64(now / w.quantum)
	if to <= w.cursor {
		return expired
	}
	if w.slots == nil { // nothing was ever filed
		w.cursor = to
		return expired
	}
	from := w.cursor + 1
	// A full turn visits every slot once. (The span in uint64: from a
	// negative cursor to a far now, to-from overflows an int64.)
	if uint64(to)-uint64(from) >= uint64(len(w.slots)) {
		from = to - int64(len(w.slots)) + 1
	}
	for t := from; ; t++ {
		slot := w.slot(t)
		h := &w.slots[slot]
		for e := h.next; e != h; {
			next := e.next
			if dt := w.tick(e.deadline); dt <= to {
				w.unlink(e)
				w.n--
				expired = append(expired, e)
			} else if w.slot(dt) != slot { // filed here, due elsewhere
				w.unlink(e) // its deadline moved: re-file lazily
				w.file(e)
			}
			e = next
		}
		if t == to { // not t <= to in the loop's test: t++ past MaxInt64 wraps
			break
		}
	}
	w.cursor = to
	return expired
}

// slot returns the slot of tick t: t modulo the slots, never negative (a
// wheel made at a negative offset counts negative ticks).
func (w *Wheel[T]) slot(t int64) int {
	return int(uint64(t) % uint64(len(w.slots)))
}

func (w *Wheel[T]) tick(d time.Duration) int64 {
	t := int64(d / w.quantum)
	if d%w.quantum != 0 {
		t++ // round up: never expire before the deadline
	}
	if t <= w.cursor && w.cursor < math.MaxInt64 {
		t = w.cursor + 1 // already due: the next Advance sees it
	}
	return t
}

func (w *Wheel[T]) file(e *Entry[T]) {
	if w.slots == nil {
		w.alloc()
	}
	s := w.slot(w.tick(e.deadline))
	h := &w.slots[s]
	e.prev, e.next = h.prev, h
	h.prev.next = e
	h.prev = e
}

func (w *Wheel[T]) unlink(e *Entry[T]) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}
