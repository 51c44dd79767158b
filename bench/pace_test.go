package main

import (
	"testing"
	"testing/synctest"
	"time"
)

// The pacer releases each call at its due time or, when it wakes late,
// with every call due meanwhile, stamped with that release: never early,
// never more than were due, all of them, in order.
func TestThePacerReleasesEachCallWhenDueStampedWithItsRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, rate = 50, 10_000 // a call every 100 µs
		gap := time.Second / rate
		arrivals := make(chan time.Time, n)
		start := time.Now()
		go pace(arrivals, start, n, rate)
		var got []time.Time
		for at := range arrivals {
			got = append(got, at)
		}
		if len(got) != n {
			t.Fatalf("released %d calls, want %d", len(got), n)
		}
		for i, at := range got {
			// In the bubble the pacer wakes exactly on time.
			if due := start.Add(gap * time.Duration(i)); !at.Equal(due) {
				t.Errorf("call %d released at +%v, due at +%v", i, at.Sub(start), due.Sub(start))
			}
		}
	})
}

// A pacer that wakes late releases the calls due meanwhile together, each
// stamped with the late release rather than with when it was due: the
// generator's lateness is no runtime's.
func TestALatePacerReleasesTheCallsDueMeanwhileTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, rate = 10, 10_000
		arrivals := make(chan time.Time, n)
		start := time.Now().Add(-350 * time.Microsecond) // the first four are due already
		go pace(arrivals, start, n, rate)
		now := time.Now()
		for i := range 4 {
			if at := <-arrivals; !at.Equal(now) {
				t.Fatalf("call %d released at %v after the pacer began, want at once", i, at.Sub(now))
			}
		}
		if at := <-arrivals; !at.Equal(start.Add(400 * time.Microsecond)) {
			t.Fatalf("the fifth call released at +%v, want at its due +400µs", at.Sub(start))
		}
		for range arrivals {
		}
	})
}

// The footer gives, for steady and relay, each implementation's median of
// its calls timed from their start; workloads without them are left out.
func TestTheFooterGivesTheCallsTimedFromTheirStart(t *testing.T) {
	rs := []Result{
		{Workload: "tell", Impl: "granary", OpsPerSec: 1},
		{Workload: "steady", Impl: "protoactor", RunP50us: 8, RunP99us: 900},
		{Workload: "steady", Impl: "granary", RunP50us: 50, RunP99us: 300},
		{Workload: "steady", Impl: "granary", RunP50us: 70, RunP99us: 500},
		{Workload: "steady", Impl: "granary", RunP50us: 60, RunP99us: 100},
		{Workload: "relay", Impl: "granary", RunP50us: 150, RunP99us: 2000},
	}
	want := "calls timed from their start on their callers, not their arrival, p50/p99 µs: " +
		"steady granary 60.0/300.0, protoactor 8.0/900.0; relay granary 150.0/2000.0\n"
	if got := runTimes(rs); got != want {
		t.Fatalf("runTimes =\n%q\nwant\n%q", got, want)
	}
	if got := runTimes(rs[:1]); got != "" {
		t.Fatalf("with no paced workload: %q, want nothing", got)
	}
}

// A second footer line gives the same medians of the calls that arrived
// past the warm-up; a run too short to have any (-quick) gives none.
func TestTheFooterGivesTheCallsPastTheWarmUp(t *testing.T) {
	rs := []Result{
		{Workload: "steady", Impl: "granary", WarmP50us: 100, WarmP99us: 800},
		{Workload: "steady", Impl: "granary", WarmP50us: 120, WarmP99us: 600},
		{Workload: "steady", Impl: "granary", WarmP50us: 110, WarmP99us: 900},
		{Workload: "steady", Impl: "raw", RunP50us: 40, RunP99us: 90},
		{Workload: "relay", Impl: "protoactor", WarmP50us: 190, WarmP99us: 9000},
		{Workload: "relay", Impl: "granary", WarmP50us: 180, WarmP99us: 8000},
	}
	want := "calls that arrived after the first 250ms (the process's warm-up left out), from arrival, p50/p99 µs: " +
		"steady granary 110.0/800.0; relay granary 180.0/8000.0, protoactor 190.0/9000.0\n"
	if got := warmTimes(rs); got != want {
		t.Fatalf("warmTimes =\n%q\nwant\n%q", got, want)
	}
	if got := warmTimes(rs[3:4]); got != "" {
		t.Fatalf("with no call past the warm-up: %q, want nothing", got)
	}
}
