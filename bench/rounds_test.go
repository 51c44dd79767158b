package main

import "testing"

// Each round's ratio is printed in run order, whatever order the runs came
// in; a round one side lacks (a failed run) and a workload protoactor does
// not run are left out.
func TestTheFooterGivesEachRoundsRatio(t *testing.T) {
	rs := []Result{
		{Workload: "tell", Impl: "granary", Run: 2, OpsPerSec: 30},
		{Workload: "tell", Impl: "granary", Run: 1, OpsPerSec: 10},
		{Workload: "tell", Impl: "protoactor", Run: 1, OpsPerSec: 5},
		{Workload: "tell", Impl: "protoactor", Run: 2, OpsPerSec: 20},
		{Workload: "tell", Impl: "raw", Run: 2, OpsPerSec: 40},
		{Workload: "tell", Impl: "granary", Run: 3, OpsPerSec: 20},
		{Workload: "tell", Impl: "protoactor", Run: 3, OpsPerSec: 40},
		{Workload: "blocked", Impl: "granary", Run: 1, OpsPerSec: 9},
		{Workload: "blocked", Impl: "raw", Run: 1, OpsPerSec: 10},
	}
	got := roundRatios(rs)
	want := "granary vs protoactor, round by round: tell 2.00x 1.50x 0.50x\n" +
		"granary vs raw, round by round: tell 0.75x; blocked 0.90x\n"
	if got != want {
		t.Fatalf("roundRatios =\n%q\nwant\n%q", got, want)
	}
	if s := roundRatios(rs[7:8]); s != "" {
		t.Fatalf("with granary alone: %q, want nothing", s)
	}
}
