package main

import "math/rand/v2"

// The relay workload: steady's callers and pacing, but each call goes to a
// grain that asks another grain before it answers, as a service's grains
// call each other (a match asking its referee, a cart its inventory). The
// outer grains are the first half of the keys and the inner ones the
// second, so no two grains ever wait on each other. Every call is timed
// from the outside: two hops, the inner one made from inside a turn. No
// target: added in the fifty-second session, not among the issue's
// workloads. raw has no call from a handler (its partition would wait on
// itself), so it has no relay.
func runRelay(t target, p params) (Result, error) {
	outer := p.grains / 2
	relays := make([]*bmsg, p.grains-outer)
	for j := range relays {
		relays[j] = &bmsg{reply: true, to: int64(outer+j) + 1}
	}
	return runPaced(t, p, func(r *rand.Rand) (int64, *bmsg) {
		return int64(r.IntN(outer)), relays[r.IntN(len(relays))]
	})
}
