package main

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// The machine this was written on has two speeds between its cores: a
// cache line makes the round trip from one core to the other and back in
// about 0.11–0.17 µs in its fast state and 0.43–0.61 µs in its slow one
// (docs/performance.md, "Reading a ratio"), and a workload whose every
// message crosses the cores — ask, above all — runs at about half speed in
// the slow one, whatever the implementation. Each child measures the
// round trip just before its workload, so a run's JSON line says which
// state it ran in, and the table's footer gives the range.

// probeTrips is how many round trips a probe makes: 0.02–0.1 s, in
// probeBatches batches, of which the probe reports the median: a batch
// that shared its core with another process — a shell's pipe starting up
// beside the run — measured 2–6 times the others.
const (
	probeTrips   = 200_000
	probeBatches = 9
)

// machineState is the median of probeBatches measures of lineRoundTrip,
// probeTrips round trips in all; ok is false with fewer than two Ps.
func machineState() (rtt time.Duration, ok bool) {
	ds := make([]time.Duration, 0, probeBatches)
	for range probeBatches {
		d, ok := lineRoundTrip(probeTrips / probeBatches)
		if !ok {
			return 0, false
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], true
}

// lineRoundTrip bounces one cache line between two goroutines n times and
// returns the mean time of a round trip: each goroutine waits for the
// other's write before writing its own, so each round trip moves the line
// to the other core and back. With fewer than two Ps the goroutines would
// take turns on one core rather than bounce anything: ok is false.
func lineRoundTrip(n int) (rtt time.Duration, ok bool) {
	if n <= 0 || runtime.GOMAXPROCS(0) < 2 {
		return 0, false
	}
	var line atomic.Int64
	done := make(chan struct{})
	go func() { // the odd writes
		defer close(done)
		for i := int64(1); i < 2*int64(n); i += 2 {
			for line.Load() != i {
			}
			line.Store(i + 1)
		}
	}()
	start := time.Now()
	for i := int64(0); i < 2*int64(n); i += 2 { // the even ones
		for line.Load() != i {
		}
		line.Store(i + 1)
	}
	<-done
	return time.Since(start) / time.Duration(n), true
}
