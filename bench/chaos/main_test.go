package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A short storm of every kind keeps the promises that hold whatever the
// graph of calls: every tell handled or a dead letter, nothing handled
// twice. An ask left to its deadline — a deadlock the silo's walk did not
// fail (docs/chaos.md says which it still misses) — is reported, not
// failed on: the defaults met none in 100 runs of this build, but
// a test that fails on a rare timing would make CI cry wolf.
func TestAStormLosesAndDoublesNothing(t *testing.T) {
	cfg := defaults()
	cfg.msgs, cfg.deadline, cfg.dumpAfter = 1000, 10*time.Second, time.Hour
	v, err := runChaos(t.Context(), cfg, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(v)
	if v.nLost != 0 || v.nDoubled != 0 {
		t.Fatalf("lost %d, doubled %d: %v", v.nLost, v.nDoubled, v)
	}
	if v.timeouts > 0 {
		t.Logf("%d asks waited for their deadline: deadlocks the walk missed", v.timeouts)
	}
	if v.handled == 0 || v.outcomes["ok"] == 0 {
		t.Fatalf("the storm ran nothing: %v", v)
	}
}

// Settings the run cannot take are refused before a silo starts.
func TestBadSettingsAreRefused(t *testing.T) {
	for _, c := range []func(*config){
		func(c *config) { c.keys = 0 },
		func(c *config) { c.fan = 0 },
		func(c *config) { c.kinds = "plain,nosuch" },
	} {
		cfg := defaults()
		c(&cfg)
		if _, err := runChaos(t.Context(), cfg, t.Output()); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
