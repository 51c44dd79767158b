package silo

import (
	"runtime"
	"sync"
	"sync/atomic"
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
		var stop atomic.Bool
		for range 3 { // goroutines that keep the core, 10 ms at a time, until the yield is over
			hogs.Go(func() {
				for !stop.Load() {
				}
			})
		}
		s.yield()
		for try := 0; try < 5 && s.dog.hogged.Load() == 0; try++ {
			// One schedule in 61 takes the global queue first — where
			// the yield put the yielder — and the yield is over at once:
			// short, it cleared the suspicion (above). Suspected anew,
			// the next yield waits behind the hogs.
			longYield()
			s.yield()
		}
		stop.Store(true)
		hogs.Wait()
		require.Positive(t, s.dog.hogged.Load(), "a long yield on the real clock marks a hog")
	}
}

// On one core the real clock cannot tell a yield behind a hog from one
// across a wait of the whole process for a CPU (a container over its
// quota, test binaries beside it): a long yield of an owner only makes
// the silo suspect a hog, and the next long one marks it only if the
// process ran a hog's time slice meanwhile. CI's one-core step took such
// a wait for a hog and stopped the yields a flood's callers waited on.
func TestOnOneCoreAWaitForACPUIsNotTakenForAHog(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	s.oneP = true
	var used time.Duration // the process's CPU time, as s.cpu reads it
	s.cpu = func() (time.Duration, bool) { return used, true }
	long := func() time.Time { return time.Now().Add(-2 * hogYield) } // a yield timed from then is long

	s.yieldSince(long())
	require.Zero(t, s.dog.hogged.Load(), "one long yield on one core marked a hog")
	require.True(t, s.dog.suspect.Load())

	s.yieldSince(long()) // the process hardly ran meanwhile: it waited for a CPU
	require.Zero(t, s.dog.hogged.Load(), "a wait for a CPU was taken for a hog")
	require.False(t, s.dog.suspect.Load(), "the suspicion is told, either way")

	s.yieldSince(long())
	require.True(t, s.dog.suspect.Load())
	s.cpu = func() (time.Duration, bool) { used += hogCPU; return used, true } // each read: a time slice later
	s.yieldSince(long())
	require.Positive(t, s.dog.hogged.Load(), "a long yield during which the process ran a time slice")

	// Where the platform does not tell the CPU time, the second long
	// yield marks the hog, as before.
	s.dog.hogged.Store(0)
	s.cpu = func() (time.Duration, bool) { return 0, false }
	s.yieldSince(long())
	require.Zero(t, s.dog.hogged.Load())
	s.yieldSince(long())
	require.Positive(t, s.dog.hogged.Load())
}
