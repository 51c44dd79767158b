package silo_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A Tell to an active grain allocates nothing — whether the program builds
// its IDs from a constant kind name or from names made at run time (read
// from a request, say), whose bytes lie at a new address each time.
func TestTellAllocatesNothing(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 2}, nil)
	ctx := ctxT(t)
	const n = 16
	constant, built := make([]grain.ID, n), make([]grain.ID, n)
	for i := range n {
		constant[i] = grain.NewIntID("counter", int64(i))
		built[i] = grain.NewIntID(strings.Clone("counter"), int64(i))
		_, err := s.Ask(ctx, constant[i], get{}) // active, and a barrier
		require.NoError(t, err)
	}
	for name, ids := range map[string][]grain.ID{"constant": constant, "built at run time": built} {
		tell := func() {
			for _, id := range ids {
				if err := s.Tell(ctx, id, get{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		tell()
		if a := testing.AllocsPerRun(100, tell); a != 0 {
			t.Errorf("kind names %s: %v allocations per %d tells", name, a, n)
		}
	}
	for _, id := range constant { // a barrier: every tell was handled
		_, err := s.Ask(ctx, id, get{})
		require.NoError(t, err)
	}
}

// A call from a turn to a grain of its own partition hands the partition
// off while the turn waits; the worker that takes it over is one a finished
// handoff left, not a new one (workerpool.go): without it, each such call
// allocated one, 375 of its 806 bytes (BenchmarkNestedCall). Under the race
// detector a pool drops a quarter of what it is given, hence "most".
func TestANestedCallReusesItsHandoffsWorker(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
		require.NoError(t, silo.Register(s, "fwd", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, _ any) (any, error) {
				return gc.Silo().Ask(ctx, grain.NewID("counter", "c"), get{})
			}
		}))
	})
	ctx := ctxT(t)
	handoffs, made := s.Stats().Handoffs, s.WorkersMade()
	for range 200 {
		_, err := s.Ask(ctx, grain.NewID("fwd", "f"), get{})
		require.NoError(t, err)
	}
	require.Equal(t, uint64(200), s.Stats().Handoffs-handoffs, "every call handed the partition off")
	assert.Less(t, s.WorkersMade()-made, uint64(100), "most handoffs reuse a worker")
}

// A timer's tick allocates nothing: its envelope is the partition's own,
// filled anew for each tick (partition.fire). A fresh one each was 96
// bytes a tick — 200,000 grains ticking once a second made 19 MB of
// garbage a second, and their ticks were 15–37 ms late at p99 through the
// GCs it brought, against 2–5 ms.
func TestATickAllocatesNothing(t *testing.T) {
	var ticks atomic.Int64
	s := newSilo(t, silo.Config{Partitions: 2, IdleTimeout: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "t", func(grain.ID) tickCounter { return tickCounter{&ticks} }))
	})
	ctx := ctxT(t)
	for i := range 100 { // each ticks again as soon as its last tick's turn ends
		_, err := s.Ask(ctx, grain.NewIntID("t", int64(i)), startEager{})
		require.NoError(t, err)
	}
	waitTicks := func(n int64) int64 {
		want := ticks.Load() + n
		for ticks.Load() < want {
			require.NoError(t, ctx.Err(), "the ticks stopped")
			runtime.Gosched()
		}
		return ticks.Load()
	}
	waitTicks(1000) // warmed up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	from := ticks.Load()
	to := waitTicks(20000)
	runtime.ReadMemStats(&after)
	perTick := float64(after.Mallocs-before.Mallocs) / float64(to-from)
	assert.Less(t, perTick, 0.1, "allocations a tick")
}
