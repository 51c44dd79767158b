package silo

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/stretchr/testify/require"
)

// The monitor takes a gap between its readings of at least hogYield, in
// which the process ran less than half the time, for a stall of the whole
// process; a gap the process ran through — a hog's, or the monitor's own
// wait for a core — is none. It reads the CPU time at most every
// stallRead, and not at all where the platform does not tell it.
func TestTheMonitorTellsAStallOfTheProcessFromAHog(t *testing.T) {
	var cpu time.Duration
	reads := 0
	read := func() (time.Duration, bool) { reads++; return cpu, true }
	var w stallWatch
	ms := time.Millisecond

	require.False(t, w.see(5*ms, read), "the first reading has nothing to compare")
	cpu += 2 * ms
	require.False(t, w.see(5*ms+stallRead/2, read))
	require.Equal(t, 1, reads, "read again before stallRead")

	cpu += 4 * ms
	require.False(t, w.see(10*ms, read), "a look on time")
	cpu += 30 * ms // both cores ran through the gap: a hog
	require.False(t, w.see(40*ms, read), "a gap the process ran through")
	cpu += 2 * ms // the process stood still 40 ms: a container over its quota
	require.True(t, w.see(80*ms, read), "a gap the process stood still in")
	cpu += 9 * ms
	require.False(t, w.see(80*ms+hogYield-ms, read), "a gap shorter than hogYield")

	w.forget() // the monitor slept: its next look compares with nothing
	require.False(t, w.see(time.Second, read))

	var none stallWatch
	require.False(t, none.see(0, func() (time.Duration, bool) { return 0, false }))
	require.False(t, none.see(time.Second, func() (time.Duration, bool) { return 0, false }),
		"no CPU time, no stall")
}

// A yield that spans a stall the monitor saw marks no hog, on its reading
// or on the real clock; one that spans none does, with more cores at once.
func TestAYieldAcrossAStallOfTheProcessMarksNoHog(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the look below runs in the yield
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	s.oneP = false // a silo of more cores, whose long yields mark at once
	d := &s.dog
	// longYield yields while a look of the monitor moves its clock on by
	// hogYield, and first marks a stall at that look if stalled; the look
	// runs in the yield, unless the goroutine was preempted before it
	// read the clock (then it yields again).
	longYield := func(stalled bool) {
		for range 10 {
			at := d.now.Load()
			go func() {
				if stalled {
					d.stalled.Store(at + int64(hogYield))
				}
				d.now.Store(at + int64(hogYield))
			}()
			s.yield()
			if d.now.Load()-at == int64(hogYield) {
				return
			}
			d.now.Store(at)
		}
		t.Fatal("no look ran in the yields")
	}
	longYield(true)
	require.Zero(t, d.hogged.Load(), "a yield across a stall marked a hog")
	longYield(false)
	require.Positive(t, d.hogged.Load(), "a long yield across no stall")

	// On the real clock: the monitor looked during the yield.
	d.hogged.Store(0)
	s.epoch = time.Now().Add(-time.Hour)
	at := time.Now().Add(-2 * hogYield) // a yield timed from then is long
	from := int64(at.Sub(s.epoch))
	d.now.Store(from + int64(hogYield))
	d.stalled.Store(from + int64(hogYield))
	s.yieldSince(at)
	require.Zero(t, d.hogged.Load(), "an owner's yield across a stall marked a hog")
	d.stalled.Store(from - 1)
	s.yieldSince(at)
	require.Positive(t, d.hogged.Load(), "an owner's long yield across no stall")

	// The monitor has not looked since the yield began: it stood still
	// as well.
	d.hogged.Store(0)
	d.now.Store(from - 1)
	s.yieldSince(at)
	require.Zero(t, d.hogged.Load(), "a yield the monitor did not see marked a hog")
}

// Stats.Stalls counts the stalls the monitor saw: its looks, while a turn
// runs, at least hogYield apart (a HandoffThreshold that long, here) with
// the process's CPU time standing still between them; none while the
// process ran through them.
func TestStatsCountTheStallsTheMonitorSaw(t *testing.T) {
	for _, stood := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			s, err := New(Config{Partitions: 1, HandoffThreshold: hogYield})
			require.NoError(t, err)
			began := time.Now()
			s.cpu = func() (time.Duration, bool) {
				if stood {
					return time.Millisecond, true
				}
				return time.Since(began), true
			}
			running, release := make(chan struct{}), make(chan struct{})
			require.NoError(t, Register(s, "g", func(grain.ID) grain.Func {
				return func(context.Context, *grain.Context, any) (any, error) {
					close(running)
					<-release
					return nil, nil
				}
			}))
			require.NoError(t, s.Start())
			ctx := t.Context()
			require.NoError(t, s.Tell(ctx, grain.NewID("g", "a"), "wait"))
			<-running
			// The bubble's time: the monitor looks until the turn is handed
			// off and every owner is parked.
			time.Sleep(5 * hogYield)
			synctest.Wait()
			if stood {
				require.Positive(t, s.Stats().Stalls, "the process stood still between looks")
			} else {
				require.Zero(t, s.Stats().Stalls, "the process ran through the looks")
			}
			close(release)
			require.NoError(t, s.Shutdown(ctx))
		})
	}
}
