package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAParentRunRefusesWhatItWouldNotDoAsAsked(t *testing.T) {
	ok := parentArgs{workload: "all", runs: 3, timeout: time.Minute}
	for _, c := range []struct {
		name string
		edit func(*parentArgs)
		want string // in the error; "" for none
	}{
		{"defaults", func(*parentArgs) {}, ""},
		{"a workload given as an argument", func(a *parentArgs) { a.extra = []string{"tell"} }, `unexpected argument "tell"`},
		{"a profile outside a child", func(a *parentArgs) { a.profiled = true }, "-cpuprofile and -trace record one child run"},
		{"no timeout", func(a *parentArgs) { a.timeout = 0 }, "-timeout 0s"},
		{"no runs", func(a *parentArgs) { a.runs = 0 }, "-runs 0"},
		{"a negative rate", func(a *parentArgs) { a.rate = -1 }, "-rate -1"},
		{"an unknown implementation", func(a *parentArgs) { a.impl = "akka" }, `unknown implementation "akka"`},
		{"an unknown workload", func(a *parentArgs) { a.workload = "tel" }, `unknown workload "tel"`},
		{"a rate for a workload not paced", func(a *parentArgs) { a.workload, a.rate = "tell", 5 }, "-rate applies to the paced workloads only"},
		{"an implementation the workload has not", func(a *parentArgs) { a.workload, a.impl = "relay", "raw" }, `workload "relay" has no raw implementation`},
		{"a paced workload at a rate", func(a *parentArgs) { a.workload, a.rate = "relay", 5000 }, ""},
		{"every workload at a rate", func(a *parentArgs) { a.rate = 5000 }, ""},
	} {
		a := ok
		c.edit(&a)
		names, err := a.check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		case c.want != "" && names != nil:
			t.Errorf("%s: workloads %v along with the error", c.name, names)
		}
	}
	if names, _ := ok.check(); !slices.Equal(names, workloadNames()) {
		t.Errorf("all: %v, want every workload", names)
	}
	one := ok
	one.workload = "zipf"
	if names, _ := one.check(); !slices.Equal(names, []string{"zipf"}) {
		t.Errorf("zipf: %v", names)
	}
}
