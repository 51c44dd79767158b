package silo

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// On one core a yield that looks long on the monitor's reading — which may
// be as old as the run of whatever kept the core before it — only makes
// the silo suspect a hog; a long yield on the real clock marks it, a short
// one clears the suspicion. With more cores a long yield marks it at once.
func TestOnOneCoreALongYieldOnTheMonitorsReadingIsOnlySuspected(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the monitor's look runs in the yield
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	// longYield yields while a look of the monitor moves its clock on by
	// hogYield: the look runs in the yield, unless the goroutine was
	// preempted before it read the clock (then it yields again).
	longYield := func() {
		for range 10 {
			at := s.dog.now.Load()
			go s.dog.now.Add(int64(hogYield))
			s.yield()
			if s.dog.now.Load()-at == int64(hogYield) && s.dog.suspect.Load() || s.dog.hogged.Load() > 0 {
				return
			}
		}
	}
	for _, oneP := range []bool{true, false} {
		s.oneP = oneP
		s.dog.hogged.Store(0)
		s.dog.suspect.Store(false)

		longYield()
		if !oneP {
			require.Positive(t, s.dog.hogged.Load(), "with more cores a long yield marks a hog")
			continue
		}
		require.Zero(t, s.dog.hogged.Load(), "on one core a long yield marked a hog at once")
		require.True(t, s.dog.suspect.Load())

		s.yield() // timed on the real clock: short, nothing else wants the core
		require.Zero(t, s.dog.hogged.Load())
		require.False(t, s.dog.suspect.Load(), "a short yield on the real clock clears the suspicion")

		longYield()
		require.True(t, s.dog.suspect.Load())
		var hogs sync.WaitGroup
		for range 3 { // goroutines that keep the core, 10 ms at a time
			hogs.Go(func() {
				for start := time.Now(); time.Since(start) < 2*hogYield; {
				}
			})
		}
		s.yield()
		hogs.Wait()
		require.Positive(t, s.dog.hogged.Load(), "a long yield on the real clock marks a hog")
	}
}
