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
	// resume is where an Advance stopped short (AdvanceAtMost) goes on, in
	// the slot of tick cursor+1: after this entry, the last it visited that
	// stays there (due a turn of the wheel later), or the slot's sentinel
	// if none did — so what stays is not visited again, and an entry filed
	// there meanwhile, at the tail, is. nil: no Advance stopped short.
	// unlink moves it back past an entry that leaves.
	resume *Entry[T]
	// scan is where a pass of EachAtMost under way goes on: after this
	// entry, the last it visited, or slot scanSlot's sentinel. nil: no
	// pass under way. unlink moves it back past an entry that leaves, as
	// it does resume.
	scan     *Entry[T]
	scanSlot int
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
// every slot and entry: for the rare pass over all of them, not for every
// tick (EachAtMost takes one in slices).
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

// EachAtMost is Each in slices, for an owner that serves other work
// between them: it calls f for at most limit entries (at least one), going
// on with the pass under way where the last call stopped, or beginning one
// if none is, and reports more if the pass is not over. A pass is over when
// it has visited every slot, when f returns false, or at EndEach.
//
// Between the calls the wheel may change: an entry tracked throughout the
// pass and never re-filed is visited exactly once; one filed, re-filed
// (Touch to an earlier slot, or Advance finding its deadline moved) or
// removed meanwhile may be missed, or visited again (once more for each
// change at most). f must not Touch or Remove entries.
func (w *Wheel[T]) EachAtMost(limit int, f func(*Entry[T]) bool) (more bool) {
	if w.slots == nil { // nothing was ever filed
		return false
	}
	limit = max(limit, 1) // every call makes progress
	last, i := w.scan, w.scanSlot
	if last == nil {
		last, i = &w.slots[0], 0
	}
	w.scan = nil
	for n := 0; ; {
		h := &w.slots[i]
		for e := last.next; e != h; e = e.next {
			if n == limit {
				w.scan, w.scanSlot = last, i
				return true
			}
			n++
			if !f(e) {
				return false
			}
			last = e
		}
		if i++; i == len(w.slots) {
			return false
		}
		last = &w.slots[i]
	}
}

// EndEach ends the pass of EachAtMost under way, if any: the next call
// begins a new one.
func (w *Wheel[T]) EndEach() { w.scan = nil }

// Advance moves the wheel to now and appends to expired, and stops tracking,
// every entry whose deadline is at or before now's tick. It returns expired.
func (w *Wheel[T]) Advance(now time.Duration, expired []*Entry[T]) []*Entry[T] {
	expired, _ = w.AdvanceAtMost(now, math.MaxInt, expired)
	return expired
}

// AdvanceAtMost is Advance that expires at most limit entries (at least one):
// more reports that it stopped short, with entries due by now still
// tracked, and the next call — with this now or a later one — goes on
// where it stopped. An owner that serves other work between the calls
// bounds the time each takes: a million grains idle at once are a million
// entries to expire, each a cache miss.
func (w *Wheel[T]) AdvanceAtMost(now time.Duration, limit int, expired []*Entry[T]) (_ []*Entry[T], more bool) {
	limit = max(limit, 1) // every call makes progress
	to := int64(now / w.quantum)
	if to <= w.cursor {
		return expired, false
	}
	if w.slots == nil { // nothing was ever filed
		w.cursor = to
		return expired, false
	}
	from := w.cursor + 1
	resume := w.resume
	w.resume = nil
	// A full turn visits every slot once. (The span in uint64: from a
	// negative cursor to a far now, to-from overflows an int64.)
	if uint64(to)-uint64(from) >= uint64(len(w.slots)) {
		from = to - int64(len(w.slots)) + 1
		resume = nil // the slot it was for comes up in the turn, from its head
	}
	n := 0
	for t := from; ; t++ {
		slot := w.slot(t)
		h := &w.slots[slot]
		last := h // the last entry visited that stays in the slot
		if resume != nil {
			last, resume = resume, nil
		}
		for e := last.next; e != h; {
			if n == limit {
				w.cursor, w.resume = t-1, last
				return expired, true
			}
			next := e.next
			if dt := w.tick(e.deadline); dt <= to {
				w.unlink(e)
				w.n--
				expired = append(expired, e)
				n++
			} else if w.slot(dt) != slot { // filed here, due elsewhere
				w.unlink(e) // its deadline moved: re-file lazily
				w.file(e)
			} else {
				last = e
			}
			e = next
		}
		if t == to { // not t <= to in the loop's test: t++ past MaxInt64 wraps
			break
		}
	}
	w.cursor = to
	return expired, false
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
	if e == w.resume {
		w.resume = e.prev // visited too, or the slot's sentinel
	}
	if e == w.scan {
		w.scan = e.prev
	}
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}
