package main

import (
	"math/rand/v2"
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
// Each caller paces itself: its calls are callers/rate apart, the callers
// spread over that gap so that the load is even, not a burst each gap. A
// call that comes back late makes the next start at once (late), so an
// implementation that cannot keep the rate shows it in its calls a
// second.
func runSteady(t target, p params) (Result, error) {
	return runPaced(t, p, func(r *rand.Rand) (int64, *bmsg) {
		return int64(r.IntN(p.grains)), askMsg
	})
}

// runPaced runs steady's callers at p.rate in all, each call's key and
// message drawn by pick.
func runPaced(t target, p params, pick func(r *rand.Rand) (int64, *bmsg)) (Result, error) {
	if err := activateAll(t, p.grains); err != nil {
		return Result{}, err
	}
	per := p.msgs / p.callers
	gap := time.Second * time.Duration(p.callers) / time.Duration(p.rate)
	return runCallers(t, p, per, func(c int, ask caller, start time.Time) ([]time.Duration, error) {
		r := rand.New(rand.NewPCG(uint64(c), 5))
		mine := make([]time.Duration, 0, per)
		next := start.Add(gap * time.Duration(c) / time.Duration(p.callers))
		for range per {
			if d := time.Until(next); d > 0 {
				time.Sleep(d) // pacing a load generator, not synchronising
			}
			next = next.Add(gap)
			k, m := pick(r)
			t0 := time.Now()
			_, err := ask(k, m)
			mine = append(mine, time.Since(t0))
			if err != nil {
				return mine, err
			}
		}
		return mine, nil
	})
}
