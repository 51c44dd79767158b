package prefetch_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

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
		prefetch.LineAndRecordW(addr, at)
		prefetch.LineAndRecordW(at, addr)
	}
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

// Pointee reads the word at its address (0 aside) and prefetches where it
// points, whatever that is: nil, a live object, or no mapped memory at all.
func TestPointeeReadsOnlyTheWordItIsGiven(t *testing.T) {
	buf := make([]byte, 64)
	words := []uintptr{0, uintptr(unsafe.Pointer(&buf[0])), 1, 0xdead_0000, ^uintptr(0) - 4096}
	for i := range words {
		prefetch.Pointee(uintptr(unsafe.Pointer(&words[i])))
	}
	prefetch.Pointee(0)
	var g any = &buf // an interface's data word, as the silo prefetches a grain
	prefetch.Pointee(uintptr(unsafe.Pointer(&g)) + unsafe.Sizeof(uintptr(0)))
	require.Equal(t, []uintptr{0, uintptr(unsafe.Pointer(&buf[0])), 1, 0xdead_0000, ^uintptr(0) - 4096}, words)
}

func BenchmarkLineAndRecordW(b *testing.B) {
	buf := make([]byte, 4096)
	at := uintptr(unsafe.Pointer(&buf[0]))
	for i := 0; b.Loop(); i++ {
		prefetch.LineAndRecordW(at+uintptr(i&31)*64, at+uintptr(i&15)*192)
	}
}
