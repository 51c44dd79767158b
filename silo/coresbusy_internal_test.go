package silo

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The share of the cores a slow turn's line states is the process's CPU
// time over the stretch after the handoff, for GOMAXPROCS cores; it is
// left out where it cannot be known or the stretch is too short to say.
func TestCoresBusyIsTheProcesssShareOfItsCores(t *testing.T) {
	s := &Silo{}
	procs := time.Duration(runtime.GOMAXPROCS(0))
	const at = int64(5 * time.Second) // the CPU time read at the handoff
	var now time.Duration             // the CPU time read at the turn's end
	s.cpu = func() (time.Duration, bool) { return now, true }
	since := 20 * time.Millisecond

	for _, c := range []struct {
		name string
		used time.Duration
		want float64
	}{
		{"every core", since * procs, 1},
		{"half of them", since * procs / 2, 0.5},
		{"none", 0, 0},
		{"more than GOMAXPROCS (a cgo thread)", 2 * since * procs, 1},
	} {
		now = time.Duration(at) + c.used
		got, ok := s.coresBusy(since, at)
		require.True(t, ok, c.name)
		require.Equal(t, c.want, got, c.name)
	}

	now = time.Duration(at) + since*procs
	_, ok := s.coresBusy(since, -1)
	require.False(t, ok, "the CPU time at the handoff unknown")
	_, ok = s.coresBusy(busyWindow-1, at)
	require.False(t, ok, "too short a stretch to say")
	s.cpu = func() (time.Duration, bool) { return 0, false }
	_, ok = s.coresBusy(since, at)
	require.False(t, ok, "the platform does not tell it")
}
