//go:build !amd64 && !arm64

package prefetch

// Line does nothing on this architecture.
func Line(addr uintptr) {}

// Pointee does nothing on this architecture.
func Pointee(at uintptr) {}

// LineAndRecordW does nothing on this architecture.
func LineAndRecordW(line, rec uintptr) {}
