package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The steady workload: 1,000 callers ask random grains at a fixed rate in
// all, well below what any implementation can take, and every call is
// timed. The `ask` workload drives each implementation flat out — every
// caller asks again the moment it is answered — so its latencies are
// mostly queueing, callers over throughput (Little's law), and where a
// runtime's callers wait to run rather than for a reply, outside the
// timed call (protoactor's). This one compares them at the same load, as
// a service under ordinary traffic sees them. No target: added in the
// fifty-first session, not among the workloads.
//
// The calls arrive as a service's requests do: one pacer releases them
// at the rate, and a call is timed from its release — its arrival — to
// its answer, the time it waited for a free caller and for its caller's
// goroutine to run included, as a request read from the network waits
// for its handler's. A call timed from when its caller's goroutine first
// ran, instead, leaves that wait out of it: the wait of a runtime that
// keeps the cores on one call until it is answered, while the others'
// callers wait to run, is not counted, and the wait of one that starts
// each call at once and answers them together is. Both are reported,
// the first as p50/p99, the second as run_p50/run_p99 (the fifty-third
// session found them far apart: docs/performance.md, "At a steady
// load").
//
// The pacer sleeps until the next call is due and then releases every
// call due by then: the runtime wakes a sleeper late, up to a
// millisecond on an idle Linux machine (its poller waits in whole
// milliseconds), and the calls due meanwhile arrive together, as a
// network poller's batch of requests does. Each is timed from that
// release, not from when it was due: the load generator's own lateness is
// no runtime's. A call that finds every caller busy waits in the queue of
// released calls, and its wait counts.
func runSteady(t target, p params) (Result, error) {
	return runPaced(t, p, func(r *rand.Rand) (int64, *bmsg) {
		return int64(r.IntN(p.grains)), askMsg
	})
}

// runPaced runs steady's callers and pacer at p.rate calls a second in
// all, p.msgs calls, each call's key and message drawn by pick.
func runPaced(t target, p params, pick func(r *rand.Rand) (int64, *bmsg)) (Result, error) {
	if err := activateAll(t, p.grains); err != nil {
		return Result{}, err
	}
	calls := p.msgs - p.msgs%p.callers // as the other workloads count them
	arrivals := make(chan time.Time, calls)
	ran := make([][]time.Duration, p.callers)  // from each call's start on its caller
	warm := make([][]time.Duration, p.callers) // from arrival, past warmUp
	paced := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(paced)
		pace(arrivals, start, calls, p.rate)
	}()
	defer func() { <-paced }() // even if every caller failed: nothing outlives the run
	res, err := runCallers(t, p, calls/p.callers, func(c int, ask caller) ([]time.Duration, error) {
		r := rand.New(rand.NewPCG(uint64(c), 5))
		var mine []time.Duration
		for at := range arrivals {
			k, m := pick(r)
			t0 := time.Now()
			_, err := ask(k, m)
			done := time.Now()
			mine = append(mine, done.Sub(at))
			ran[c] = append(ran[c], done.Sub(t0))
			if at.Sub(start) >= warmUp {
				warm[c] = append(warm[c], done.Sub(at))
			}
			if err != nil {
				return mine, err
			}
		}
		return mine, nil
	})
	res.RunP50us, res.RunP99us = percentiles(slices.Concat(ran...))
	res.WarmP50us, res.WarmP99us = percentiles(slices.Concat(warm...))
	return res, err
}

// warmUp is how long after its pacer starts a paced run's calls count as
// past the process's warm-up as well (Result.WarmP50us, WarmP99us). A fresh
// process's first burst of calls is slow: its callers' goroutines and the
// runtime's start and grow their stacks, and the collector's first cycles
// run over a heap growing to its size. In Granary's relay, whose turns wait
// for their calls, the silo starts a runner goroutine for each turn that
// waits at once (some 1,200 in the first 100 ms of a slow-state run, where
// 16 a partition are kept idle after): calls released in its first 10 ms
// took up to 45 ms at the median, those after 150 ms 0.2 ms, and the
// first burst made the run's p99 up to twice what the rest had
// (docs/performance.md, "At a steady load"). A service meets it as it
// starts; the table's figures count it, these do not.
const warmUp = 250 * time.Millisecond

// pace releases n calls on arrivals at rate a second from start, each
// stamped with its release, and closes it.
func pace(arrivals chan<- time.Time, start time.Time, n, rate int) {
	defer close(arrivals)
	gap := time.Second / time.Duration(rate)
	for i := 0; i < n; {
		due := start.Add(gap * time.Duration(i))
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing a load generator, not synchronising
		}
		now := time.Now()
		for ; i < n && !start.Add(gap*time.Duration(i)).After(now); i++ {
			arrivals <- now
		}
	}
}

// runTimes says, for each workload that reports them (steady, relay), the
// median over runs of each implementation's calls timed from their start
// on their callers (Result.RunP50us, RunP99us): beside the table's, timed
// from each call's arrival, it shows how much of a call's time went to
// waiting for its caller to run.
func runTimes(rs []Result) string {
	return pairLine(rs, "calls timed from their start on their callers, not their arrival, p50/p99 µs: ",
		func(r Result) (float64, float64) { return r.RunP50us, r.RunP99us })
}

// warmTimes says the same of the calls that arrived past warmUp, timed from
// their arrival as the table's are (Result.WarmP50us, WarmP99us).
func warmTimes(rs []Result) string {
	return pairLine(rs, fmt.Sprintf("calls that arrived after the first %v (the process's warm-up left out), from arrival, p50/p99 µs: ", warmUp),
		func(r Result) (float64, float64) { return r.WarmP50us, r.WarmP99us })
}

// pairLine is a footer line of the medians over runs of a pair of
// percentiles, got, for each workload and implementation that has them, in
// the order the results came; nothing when none has.
func pairLine(rs []Result, title string, got func(Result) (p50, p99 float64)) string {
	type key struct{ w, i string }
	p50, p99 := map[key][]float64{}, map[key][]float64{}
	var order []string
	seen := map[string]bool{}
	for _, r := range rs {
		a, b := got(r)
		if a == 0 {
			continue
		}
		if !seen[r.Workload] {
			seen[r.Workload] = true
			order = append(order, r.Workload)
		}
		k := key{r.Workload, r.Impl}
		p50[k] = append(p50[k], a)
		p99[k] = append(p99[k], b)
	}
	var parts []string
	for _, w := range order {
		var xs []string
		for _, im := range impls {
			if k := (key{w, im}); len(p50[k]) > 0 {
				xs = append(xs, fmt.Sprintf("%s %.1f/%.1f", im, median(p50[k]), median(p99[k])))
			}
		}
		parts = append(parts, w+" "+strings.Join(xs, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return title + strings.Join(parts, "; ") + "\n"
}
