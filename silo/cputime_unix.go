//go:build unix

package silo

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used so far, user and system,
// and whether the platform tells it: how the silo tells a yield that waited
// for a goroutine of the program from one that waited for the process to
// get a CPU back (yield.go). A system call, taken only to confirm a
// suspected hog.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
