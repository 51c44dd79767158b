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
// handler's ctx: it fits the allocator's 208-byte class, so that a silo
// answering calls allocates, and collects, as little as it can
// (BenchmarkCall's B/op). It was 176 bytes until the request kept a slot
// for its outcome (queues.Request.Take): the reply no longer goes through
// a channel whose lock both cores take, `ask` 1.05–1.09x for 32 more bytes.
func TestAnAskFits208Bytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sized for 64-bit platforms")
	}
	if n := unsafe.Sizeof(askCtx{}); n > 208 {
		t.Fatalf("askCtx is %d bytes, want at most 208", n)
	}
}
