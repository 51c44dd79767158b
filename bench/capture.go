package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// capture starts what a child run records of itself: a CPU profile to the
// file cpuprofile names and an execution trace to traceTo's, each only if
// named. stop ends both and closes their files; call it once the workload
// is done, before the process exits. On an error nothing is left running.
func capture(cpuprofile, traceTo string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range stops {
			f()
		}
	}
	start := func(flag, path string, begin func(*os.File) error, end func()) error {
		f, err := os.Create(path)
		if err == nil {
			if err = begin(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		stops = append(stops, func() { end(); f.Close() })
		return nil
	}
	if cpuprofile != "" {
		if err := start("-cpuprofile", cpuprofile, func(f *os.File) error { return pprof.StartCPUProfile(f) }, pprof.StopCPUProfile); err != nil {
			return func() {}, err
		}
	}
	if traceTo != "" {
		if err := start("-trace", traceTo, func(f *os.File) error { return trace.Start(f) }, trace.Stop); err != nil {
			stop()
			return func() {}, err
		}
	}
	return stop, nil
}
