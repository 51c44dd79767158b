//go:build amd64 || arm64

package prefetch

// Line asks the CPU to bring the cache line holding addr into its cache.
// addr may be any value: a prefetch of an unmapped address is dropped.
//
//go:noescape
func Line(addr uintptr)

// LineAndRecord prefetches the line holding line and, unless rec is 0, the
// two lines from rec on (a record of up to 128 bytes): two lookups' worth
// of prefetching in one call.
//
//go:noescape
func LineAndRecord(line, rec uintptr)
