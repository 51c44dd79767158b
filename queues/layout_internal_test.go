package queues

import (
	"testing"
	"unsafe"
)

// A push reads and writes only the queue's first 64 bytes and the slot it
// fills: with the tail segment's count in the queue rather than at the end
// of the 22 KB segment, and the queue allocated in a size class whose
// objects begin on a cache line, a push from the other core moves two
// lines, not three to five (ask and tell 1.05x in the slow state between
// the cores; docs/performance-log.md, item 63).
func TestAQueuesPushFieldsShareOneCacheLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is laid out for 64-bit platforms")
	}
	var q Queue[Envelope, int]
	if got := unsafe.Sizeof(q); got != 192 {
		t.Errorf("a Queue is %d bytes; want 192, a size class whose objects begin on a cache line", got)
	}
	for name, end := range map[string]uintptr{
		"mu":    unsafe.Offsetof(q.mu) + unsafe.Sizeof(q.mu),
		"tail":  unsafe.Offsetof(q.tail) + unsafe.Sizeof(q.tail),
		"n":     unsafe.Offsetof(q.n) + unsafe.Sizeof(q.n),
		"room":  unsafe.Offsetof(q.room) + unsafe.Sizeof(q.room),
		"tailN": unsafe.Offsetof(q.tailN) + unsafe.Sizeof(q.tailN),
		"gate":  unsafe.Offsetof(q.gate) + unsafe.Sizeof(q.gate),
		"idle":  unsafe.Offsetof(q.idle) + unsafe.Sizeof(q.idle),
		"ctl":   unsafe.Offsetof(q.ctl) + unsafe.Sizeof(q.ctl),
	} {
		if end > 64 {
			t.Errorf("%s ends at byte %d, past the first cache line", name, end)
		}
	}
	for range 8 {
		if p := uintptr(unsafe.Pointer(newHeapQueue())); p%64 != 0 {
			t.Fatalf("a new Queue at %#x: not on a cache line", p)
		}
	}
}

// The tail segment's count lives in the queue until a Drain takes the
// segment or a push fills it: the batch sees every item either way.
func TestTheTailsCountReachesItsBatch(t *testing.T) {
	q := New[int, int](0)
	for _, n := range []int{1, segSize - 1, segSize, segSize + 1, 3*segSize + 7} {
		for i := range n {
			if err := q.Push(i); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := q.Drain(nil)
		got := 0
		for v, ok := b.Pop(); ok; v, ok = b.Pop() {
			if v != got {
				t.Fatalf("%d pushed: item %d is %d", n, got, v)
			}
			got++
		}
		if got != n {
			t.Fatalf("%d pushed, %d drained", n, got)
		}
	}
}

// newHeapQueue returns a new queue from the heap, as every queue a silo
// makes is: inlined into a test that keeps it, New's could be on the stack.
//
//go:noinline
func newHeapQueue() *Queue[Envelope, int] { return New[Envelope, int](0) }

// The outcome and the word that hands it over are read together by the
// caller (Take) and written together by the owner (Resolve): in a request
// that begins on a cache line — a silo's ask record is allocated so — they
// lie in one line.
func TestARequestsOutcomeSharesALineWithItsHandover(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("laid out for 64-bit platforms")
	}
	var r Request
	first := unsafe.Offsetof(r.out) / 64
	last := (unsafe.Offsetof(r.handover) + unsafe.Sizeof(r.handover) - 1) / 64
	if first != last || (unsafe.Offsetof(r.out)+unsafe.Sizeof(r.out)-1)/64 != first {
		t.Fatalf("out at %d–%d and handover at %d: on different lines",
			unsafe.Offsetof(r.out), unsafe.Offsetof(r.out)+unsafe.Sizeof(r.out), unsafe.Offsetof(r.handover))
	}
	if n := unsafe.Sizeof(r); n != 104 {
		t.Fatalf("a Request is %d bytes, want 104", n)
	}
}
