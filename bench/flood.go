package main

import (
	"fmt"
	"time"
)

// The flood workload: one grain is sent p.msgs tells at once, each turn
// floodWork of CPU, while a client asks p.grains other grains of the same
// partition, one ask at a time, floodGap apart, until the flood is
// handled. It reports the flood's rate and the asks' p50/p99: how long a
// grain's neighbours wait while another is flooded. A runtime that runs a
// partition's messages in arrival order makes the first ask wait for the
// whole flood (raw); one that slices it, a slice (Granary, Orleans); one
// with a goroutine an actor, a core's share (protoactor).

// floodWork is the CPU each of the flood's turns spends: work, not a sleep,
// which a runtime may hand off.
const floodWork = 200 * time.Microsecond

// floodGap is the pause between the asks.
const floodGap = time.Millisecond

// spin spends d of CPU.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// neighbourer is a target that knows which keys share a partition;
// without it, any keys will do (an implementation with no partitions).
type neighbourer interface {
	neighbours(n int) []int64
}

func runFlood(t target, p params) (Result, error) {
	keys := make([]int64, p.grains+1)
	for i := range keys {
		keys[i] = int64(i)
	}
	if nb, ok := t.(neighbourer); ok {
		keys = nb.neighbours(p.grains + 1)
	}
	for _, k := range keys { // activate them all first
		if _, err := t.Ask(k, peekMsg); err != nil {
			return Result{}, err
		}
	}
	base := t.Signals()
	start := time.Now()
	for i := range p.msgs {
		if err := t.Tell(keys[0], floodMsg); err != nil {
			return Result{}, fmt.Errorf("flood %d: %w", i, err)
		}
	}
	var lat []time.Duration
	last, since := int64(-1), time.Now()
	for i := 0; ; i++ {
		n := t.Signals() - base
		if n >= int64(p.msgs) {
			break
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= p.stallLimit() {
			return Result{}, fmt.Errorf("lost messages: %d of %d handled, none more in %v", n, p.msgs, p.stallLimit())
		}
		t0 := time.Now()
		if _, err := t.Ask(keys[1+i%p.grains], askMsg); err != nil {
			return Result{}, err
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(floodGap)
	}
	el := time.Since(start)
	n, err := t.Ask(keys[0], peekMsg)
	if err != nil {
		return Result{}, err
	}
	p50, p99 := percentiles(lat)
	return Result{OpsPerSec: float64(p.msgs) / el.Seconds(), P50us: p50, P99us: p99}, check(n, p.msgs)
}
