package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// parentArgs are the flags of a parent run (the one a user starts), checked
// before any child runs: a mistake is reported at once, not after minutes of
// runs that were not the ones meant.
type parentArgs struct {
	workload, impl string
	runs, rate     int
	timeout        time.Duration
	extra          []string // the arguments after the flags: none are taken
	profiled       bool     // -cpuprofile or -trace given: a child's flags
}

// check returns the workloads to run, in order, or what is wrong.
func (a parentArgs) check() ([]string, error) {
	names := workloadNames()
	switch {
	case len(a.extra) > 0:
		// `go run . tell` would otherwise run every workload: seven minutes.
		return nil, fmt.Errorf("unexpected argument %q: name a workload with -workload (have %s, or all)", a.extra[0], strings.Join(names, ", "))
	case a.profiled:
		return nil, errors.New("-cpuprofile and -trace record one child run: add -child, -impl and -run (docs/performance.md, Reproduce)")
	case a.timeout <= 0:
		return nil, fmt.Errorf("-timeout %v: must be positive", a.timeout)
	case a.runs < 1:
		return nil, fmt.Errorf("-runs %d: one at least", a.runs)
	case a.rate < 0:
		return nil, fmt.Errorf("-rate %d: calls a second, 0 for each workload's own", a.rate)
	case a.impl != "" && !slices.Contains(impls, a.impl):
		return nil, fmt.Errorf("unknown implementation %q (have %s)", a.impl, strings.Join(impls, ", "))
	case a.workload == "all":
		return names, nil
	}
	if _, ok := workloads[a.workload]; !ok {
		return nil, fmt.Errorf("unknown workload %q (have %s)", a.workload, strings.Join(names, ", "))
	}
	if a.rate > 0 && !takesRate(a.workload) {
		return nil, fmt.Errorf("-rate applies to the paced workloads only (steady, relay), not %q", a.workload)
	}
	if a.impl != "" && workloads[a.workload][a.impl] == nil {
		return nil, fmt.Errorf("workload %q has no %s implementation (it runs %s)", a.workload, a.impl, strings.Join(implsOf(a.workload), ", "))
	}
	return []string{a.workload}, nil
}
