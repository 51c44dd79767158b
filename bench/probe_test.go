package main

import (
	"runtime"
	"testing"
)

func TestTheProbeBouncesALineOnlyWithTwoPs(t *testing.T) {
	if runtime.GOMAXPROCS(0) >= 2 {
		rtt, ok := lineRoundTrip(1000)
		if !ok || rtt <= 0 {
			t.Fatalf("lineRoundTrip(1000) = %v, %v; want a positive time", rtt, ok)
		}
		if rtt, ok := machineState(); !ok || rtt <= 0 {
			t.Fatalf("machineState() = %v, %v; want a positive time", rtt, ok)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if rtt, ok := lineRoundTrip(1000); ok {
		t.Fatalf("with one P: lineRoundTrip = %v, true; want false", rtt)
	}
	if _, ok := lineRoundTrip(0); ok {
		t.Fatal("lineRoundTrip(0) = true")
	}
	if rtt, ok := machineState(); ok {
		t.Fatalf("with one P: machineState = %v, true; want false", rtt)
	}
}

func TestTheFooterGivesEachWorkloadsMachineStates(t *testing.T) {
	rs := []Result{
		{Workload: "tell", Impl: "granary", Run: 1, LineRTTns: 120},
		{Workload: "tell", Impl: "raw", Run: 1, LineRTTns: 480},
		{Workload: "ask", Impl: "granary", Run: 1, LineRTTns: 300},
		{Workload: "ask", Impl: "raw", Run: 1}, // one P: not measured
	}
	got := machineStates(rs)
	want := "a cache line's round trip between two cores as each run began, ns (probe.go): tell 120–480; ask 300–300\n"
	if got != want {
		t.Fatalf("machineStates =\n%q\nwant\n%q", got, want)
	}
	if s := machineStates(rs[3:]); s != "" {
		t.Fatalf("with no state measured: %q, want nothing", s)
	}
}
