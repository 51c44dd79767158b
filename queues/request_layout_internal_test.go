package queues

import (
	"testing"
	"unsafe"
)

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
