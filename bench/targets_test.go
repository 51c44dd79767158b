package main

import (
	"errors"
	"testing"
)

// The targets line gives each target whose workloads ran, Granary's median
// against it, and whether it is met; a target at its bound exactly is met,
// and a missed one against a peer says what raw measured against it (none
// for ask here: raw did not run).
func TestTheTargetsLineSaysWhichAreMet(t *testing.T) {
	rs := []Result{
		// ask: Granary over protoactor 2.0x, 3.0x and 4.0x by round: 3.0x, met at the bound.
		{Workload: "ask", Impl: "granary", Run: 1, OpsPerSec: 2},
		{Workload: "ask", Impl: "protoactor", Run: 1, OpsPerSec: 1},
		{Workload: "ask", Impl: "granary", Run: 2, OpsPerSec: 9},
		{Workload: "ask", Impl: "protoactor", Run: 2, OpsPerSec: 3},
		{Workload: "ask", Impl: "granary", Run: 3, OpsPerSec: 8},
		{Workload: "ask", Impl: "protoactor", Run: 3, OpsPerSec: 2},
		// tell: 2.4x protoactor, missed; 1.2x raw, met.
		{Workload: "tell", Impl: "granary", Run: 1, OpsPerSec: 12},
		{Workload: "tell", Impl: "protoactor", Run: 1, OpsPerSec: 5},
		{Workload: "tell", Impl: "raw", Run: 1, OpsPerSec: 10},
		// activate: 301 bytes at the median, missed; no protoactor run.
		{Workload: "activate", Impl: "granary", Run: 1, OpsPerSec: 1, BytesPerActivation: 165},
		{Workload: "activate", Impl: "granary", Run: 2, OpsPerSec: 1, BytesPerActivation: 301},
		{Workload: "activate", Impl: "granary", Run: 3, OpsPerSec: 1, BytesPerActivation: 400},
		// blocked: p99 10 ms, the bound.
		{Workload: "blocked", Impl: "granary", Run: 1, OpsPerSec: 1, P99us: 10000},
		{Workload: "blocked", Impl: "raw", Run: 1, OpsPerSec: 1, P99us: 2e6},
	}
	want := "targets: tell 2.40x protoactor (≥ 2.5x) MISSED (raw itself 2.00x); tell 1.20x raw (≥ 0.7x) met; " +
		"ask 3.00x protoactor (≥ 3x) met; activate 301 bytes an activation (≤ 300) MISSED; " +
		"blocked p99 10000 µs (≤ 10000) met — 3 of 5 met\n"
	if got := targets(rs, false); got != want {
		t.Fatalf("targets =\n%q\nwant\n%q", got, want)
	}
	if got := targets(rs[:2], true); got != "targets (-quick: not the targets' sizes): ask 2.00x protoactor (≥ 3x) MISSED — 0 of 1 met\n" {
		t.Fatalf("quick, one round: %q", got)
	}
	if got := targets(nil, false); got != "" {
		t.Fatalf("no runs: %q, want nothing", got)
	}
}

// A run that failed is named in the footer's last line, with why — the
// error its JSON line gives, or how its child ended — so a reader of the
// summary sees the rounds the table and the targets rest on are fewer.
func TestAFailedRunIsNamedWithWhy(t *testing.T) {
	lost := failure("zipf", "granary", 2, Result{Error: "lost messages: counted 10099419, want 10100000"}, errors.New("exit status 1"))
	crashed := failure("tell", "raw", 3, Result{}, errors.New("signal: killed"))
	got := failedRuns([]string{lost, crashed})
	want := "FAILED, left out of the table, the ratios and the targets: zipf granary run 2 (lost messages: counted 10099419, want 10100000); tell raw run 3 (signal: killed)\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
