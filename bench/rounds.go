package main

import (
	"fmt"
	"slices"
	"strings"
)

// runKey names one run: a workload, an implementation, a round.
type runKey struct {
	w, i string
	r    int
}

// opsByRun indexes the results' throughput by run, and lists their
// workloads in the order they came.
func opsByRun(rs []Result) (map[runKey]float64, []string) {
	ops := map[runKey]float64{}
	var order []string
	for _, r := range rs {
		if !slices.Contains(order, r.Workload) {
			order = append(order, r.Workload)
		}
		ops[runKey{r.Workload, r.Impl, r.Run}] = r.OpsPerSec
	}
	return ops, order
}

// roundRatios says, for each workload, Granary's throughput over each
// other implementation's in every round of runs, in run order: the spread
// behind the table's medians. On a machine whose speed drifts, a median of
// three ratios hides a round taken in another state (2.20x, 2.59x, 2.74x
// prints as 2.59x); this prints all three.
func roundRatios(rs []Result) string {
	ops, order := opsByRun(rs)
	runs := map[string][]int{} // Granary's rounds of each workload, in run order
	for _, r := range rs {
		if r.Impl == "granary" && !slices.Contains(runs[r.Workload], r.Run) {
			runs[r.Workload] = append(runs[r.Workload], r.Run)
		}
	}
	for _, rr := range runs {
		slices.Sort(rr)
	}
	var b strings.Builder
	for _, other := range impls {
		if other == "granary" {
			continue
		}
		var parts []string
		for _, w := range order {
			var xs []string
			for _, r := range runs[w] {
				g, o := ops[runKey{w, "granary", r}], ops[runKey{w, other, r}]
				if g > 0 && o > 0 {
					xs = append(xs, fmt.Sprintf("%.2fx", g/o))
				}
			}
			if len(xs) > 0 {
				parts = append(parts, w+" "+strings.Join(xs, " "))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "granary vs %s, round by round: %s\n", other, strings.Join(parts, "; "))
		}
	}
	return b.String()
}
