package directory_test

import (
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/granary-go/granary/grain"
)

// TestGrowthFaultsEachPageInOnce: a table that grows faults each page of
// its new arrays in once, as an array written first does (Table.alloc).
// Read first — a probe for an empty slot — a page was mapped to the
// kernel's zero page and faulted again on the write that followed, a
// copy-on-write fault that flushes the TLB on every CPU of the process:
// twice the faults, and `activate` 1.34x slower (docs/performance-log.md,
// item 53). The faults are counted against those of the same arrays
// written a page at a time and then read, which under the race detector
// include its shadow memory's.
func TestGrowthFaultsEachPageInOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("grows a table to a million slots")
	}
	const n = 500_000 // a partition's share of the bench's `activate`: arrays of 16 to 1,048,576 slots
	es := make([]entry, n)
	hs := make([]uint64, n)
	for i := range es {
		es[i].id = grain.NewIntID("k", int64(i))
		hs[i] = es[i].id.Hash()
	}
	type slot struct{ h, v uint64 } // a slot's size, no pointer: nothing for the GC to read first
	page := os.Getpagesize()
	debug.FreeOSMemory() // what the arrays get comes fresh from the OS
	c0 := minorFaults(t)
	var arrays [][]slot
	bytes := 0
	for size := 16; size <= 1<<20; size *= 2 {
		a := make([]slot, size)
		for i := 0; i < size; i += page / 16 {
			a[i].h = 1
		}
		for i := range a { // every slot, as the growth reads them (the race detector's shadow too)
			if a[i].v != 0 {
				t.Fatal("a new array not zeroed")
			}
		}
		arrays = append(arrays, a)
		bytes += size * 16
	}
	control := minorFaults(t) - c0
	runtime.KeepAlive(arrays)
	arrays = nil

	debug.FreeOSMemory()
	f0 := minorFaults(t)
	tb := newTable()
	for i := range es {
		tb.Put(es[i].id, hs[i], &es[i])
	}
	growth := minorFaults(t) - f0
	runtime.KeepAlive(tb)

	pages := int64(bytes / page)
	t.Logf("%d faults growing the table, %d writing the same arrays first, then reading them; %d pages", growth, control, pages)
	// Read first, the growth measured about one fault more a page; written
	// first, a few hundred more in all without the race detector, up to
	// 2,500 with it (the GC's own pages, the entries' shadow).
	if growth-control > pages*5/8 {
		t.Errorf("growing the table faulted %d times, %d more than writing its arrays a page at a time: about twice a page (%d pages), a read before each page's first write",
			growth, growth-control, pages)
	}
}

func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return int64(ru.Minflt)
}
