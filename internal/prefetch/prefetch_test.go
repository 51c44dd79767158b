package prefetch_test

import (
	"testing"
	"unsafe"

	"github.com/granary-go/granary/internal/prefetch"
)

// A prefetch changes nothing a program computes and never faults, whatever
// the address: mapped, nil, or nowhere.
func TestPrefetchNeverFaults(t *testing.T) {
	buf := make([]byte, 256)
	for i := range buf {
		buf[i] = byte(i)
	}
	at := uintptr(unsafe.Pointer(&buf[0]))
	for _, addr := range []uintptr{at, 0, 1, 0xdead_0000, ^uintptr(0) - 4096} {
		prefetch.Line(addr)
		prefetch.LineAndRecord(addr, at)
		prefetch.LineAndRecord(at, addr)
	}
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

func BenchmarkLineAndRecord(b *testing.B) {
	buf := make([]byte, 4096)
	at := uintptr(unsafe.Pointer(&buf[0]))
	for i := 0; b.Loop(); i++ {
		prefetch.LineAndRecord(at+uintptr(i&31)*64, at+uintptr(i&15)*192)
	}
}
