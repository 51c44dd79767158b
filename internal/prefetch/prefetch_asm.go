//go:build amd64 || arm64

package prefetch

// Line asks the CPU to bring the cache line holding addr into its cache.
// addr may be any value: a prefetch of an unmapped address is dropped.
//
//go:noescape
func Line(addr uintptr)

// LineAndRecordW prefetches the line holding line and, unless rec is 0, the
// two lines from rec on (a record of up to 128 bytes) to be written
// (PREFETCHW): a record a store will soon change comes as the core's
// own, with no other core's copy left to invalidate when the store
// comes. Two lookups' worth of prefetching in one call.
//
//go:noescape
func LineAndRecordW(line, rec uintptr)

// Pointee prefetches the line that the pointer stored at at points to, unless
// at or that pointer is 0: a record reached through another, such as a
// grain behind its activation record. Unlike a prefetch, the read of at
// faults if at is not readable: it must be 0 or the address of a
// pointer-sized word of a live object. The word is read in assembly, out
// of the race detector's sight: its value only steers a prefetch, so a
// word being written meanwhile by another goroutine is harmless (an
// aligned word is read whole, and a stale pointer only wastes the prefetch).
//
//go:noescape
func Pointee(at uintptr)
