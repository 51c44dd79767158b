package silo

import (
	"testing"
	"unsafe"
)

// The activation record is two cache lines: a silo holds millions, and a
// delivery touches the record of every message's grain.
func TestActIs128Bytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sized for 64-bit platforms")
	}
	if n := unsafe.Sizeof(act{}); n != 128 {
		t.Fatalf("act is %d bytes, want 128", n)
	}
}

// The record of what only some grains need fits a 192-byte size class: a
// grain with a timer needs it (BenchmarkIdleGrainMemory).
func TestActExtraFits192Bytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sized for 64-bit platforms")
	}
	if n := unsafe.Sizeof(actExtra{}); n > 192 {
		t.Fatalf("actExtra is %d bytes, want at most 192", n)
	}
}

// An ask from outside a turn allocates one record, its request with the
// handler's ctx: 192 bytes, a size class whose objects begin on a cache
// line, so that the lines an ask moves between the caller's core and the
// owner's are three, and the outcome and the word that hands it over lie
// in one of them (queues.TestARequestsOutcomeSharesALineWithItsHandover).
// It was 176 bytes until the request kept a slot for its outcome (log
// item 62), then 208, in a class whose objects fall anywhere on a line:
// for half the asks the outcome and its word were on two lines, a miss
// more for the caller and the owner each (log item 64). Its request's
// flags share the handover's word, and its ctx's share one, to fit.
func TestAnAskFits192Bytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sized for 64-bit platforms")
	}
	if n := unsafe.Sizeof(askCtx{}); n != 192 {
		t.Fatalf("askCtx is %d bytes, want 192", n)
	}
	if off := unsafe.Offsetof(askCtx{}.req); off != 0 {
		t.Fatalf("the request is at byte %d of askCtx, want 0", off)
	}
	for range 8 {
		if p := uintptr(unsafe.Pointer(newHeapAsk())); p%64 != 0 {
			t.Fatalf("a new askCtx at %#x: not on a cache line", p)
		}
	}
}

// newHeapAsk allocates an ask record as Ask does.
//
//go:noinline
func newHeapAsk() *askCtx { return &askCtx{} }
