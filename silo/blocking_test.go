package silo_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// storeGrain loads and saves through a store that takes wait (a database's
// round trip, in a synctest bubble's time), counting the loads and saves
// under way at once and the most ever.
type storeGrain struct {
	st     *slowStore
	loaded bool
}

type slowStore struct {
	wait         time.Duration
	now, most    atomic.Int32
	loads, saves atomic.Int32
	slowFirst    int32 // only the first slowFirst hooks take wait; 0: all do
}

func (st *slowStore) io() {
	n := st.now.Add(1)
	for m := st.most.Load(); n > m && !st.most.CompareAndSwap(m, n); m = st.most.Load() {
	}
	if st.slowFirst == 0 || st.loads.Load()+st.saves.Load() < st.slowFirst {
		time.Sleep(st.wait) // the store's latency, on the bubble's clock
	}
	st.now.Add(-1)
}

func (g *storeGrain) OnActivate(context.Context, *grain.Context) error {
	g.st.io()
	g.st.loads.Add(1)
	g.loaded = true
	return nil
}

func (g *storeGrain) OnDeactivate(context.Context, *grain.Context) error {
	g.st.io()
	g.st.saves.Add(1)
	return nil
}

func (g *storeGrain) Receive(context.Context, *grain.Context, any) (any, error) {
	return g.loaded, nil
}

// askEach asks grains 0 to n-1 of kind for get{}, one after another.
func askEach(t *testing.T, s *silo.Silo, kind string, n int) {
	t.Helper()
	for i := range n {
		_, err := s.Ask(context.Background(), grain.NewIntID(kind, int64(i)), get{})
		require.NoError(t, err)
	}
}

// askAllAtOnce asks grains 0 to n-1 of kind each for its own number, all
// at once, and waits for every answer.
func askAllAtOnce(t *testing.T, s *silo.Silo, kind string, n int) {
	t.Helper()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.Ask(context.Background(), grain.NewIntID(kind, int64(i)), i)
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
}

// storeSilo is a started silo of one partition whose watchdog never hands
// a turn off (a threshold of an hour): what runs side by side does so
// because the silo started it off the partition.
func storeSilo(t *testing.T, st *slowStore) *silo.Silo {
	return newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour, IdleTimeout: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "store", func(grain.ID) *storeGrain { return &storeGrain{st: st} }))
	})
}

// A Shutdown of grains whose OnDeactivate blocks on a store saves side by
// side: the first two saves took long, so the kind's next ones start off
// the partition (blocking.go), at most Config.MaxBlockingTurns (64 by
// default) at once and one more on the partition. One after another, 200
// saves of 2 ms took 400 ms and never more than one was under way.
func TestAShutdownSavesSideBySideWhenSavesBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowStore{wait: 2 * time.Millisecond}
		s := storeSilo(t, st)
		ctx := context.Background()
		const n = 200
		askEach(t, s, "store", n)
		loadsMost := st.most.Load()
		st.most.Store(0)
		t0 := time.Now()
		require.NoError(t, s.Shutdown(ctx))
		took := time.Since(t0)
		assert.Equal(t, int32(n), st.saves.Load(), "saves")
		assert.Greater(t, st.most.Load(), int32(32), "saves under way at once")
		assert.LessOrEqual(t, st.most.Load(), int32(65), "saves under way at once: MaxBlockingTurns, and one on the partition")
		assert.Less(t, took, 40*time.Millisecond, "the Shutdown, on the bubble's clock")
		assert.Equal(t, int32(1), loadsMost, "the loads came one ask at a time")
	})
}

// A cold start of grains whose OnActivate blocks on a store loads side by
// side, and each grain still answers its first message only once its own
// load has ended.
func TestActivationsLoadSideBySideWhenLoadsBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowStore{wait: 2 * time.Millisecond}
		s := storeSilo(t, st)
		ctx := context.Background()
		const n = 200
		answers := make(chan any, n)
		for i := range n {
			go func() {
				v, err := s.Ask(ctx, grain.NewIntID("store", int64(i)), get{})
				if err != nil {
					v = err
				}
				answers <- v
			}()
		}
		for range n {
			require.Equal(t, true, <-answers, "answered after its load")
		}
		assert.Equal(t, int32(n), st.loads.Load())
		assert.Greater(t, st.most.Load(), int32(32), "loads under way at once")
		assert.LessOrEqual(t, st.most.Load(), int32(65), "loads under way at once")
	})
}

// Hooks that take no time run on their partition, as any quick turn does:
// going off costs a handoff each. One that took long — its goroutine
// preempted, its code cold — sends none off; two in a row send only their
// kind's next sixteen (hookOffRuns), and quick ones bring them back.
func TestQuickHooksStayOnTheirPartition(t *testing.T) {
	for _, slow := range []int32{1, 2} {
		t.Run(fmt.Sprintf("slowFirst=%d", slow), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &slowStore{wait: 2 * time.Millisecond, slowFirst: slow}
				s := storeSilo(t, st)
				ctx := context.Background()
				const n = 200
				askEach(t, s, "store", n)
				handoffs := s.Stats().Handoffs
				if slow == 1 {
					assert.Zero(t, handoffs, "a load went off the partition after one long one")
				} else {
					assert.Positive(t, handoffs, "the loads after two long ones went off the partition")
					assert.LessOrEqual(t, handoffs, uint64(16), "handoffs for %d loads, all but two quick", n)
				}
				require.NoError(t, s.Shutdown(ctx))
				assert.Equal(t, handoffs, s.Stats().Handoffs, "quick saves went off the partition")
				assert.Equal(t, int32(n), st.saves.Load())
			})
		})
	}
}

// blockingGrain's turns wait on a store, as a handler that queries a
// database does: wait on the bubble's clock, counting the turns under way
// at once (across grains) and checking that its own never overlap.
type blockingGrain struct {
	st    *slowStore
	guard turnGuard
	seen  []int
}

func (g *blockingGrain) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	g.guard.enter()
	defer g.guard.leave()
	switch m := msg.(type) {
	case int:
		g.st.io()
		g.seen = append(g.seen, m)
		return nil, nil
	case get:
		return append([]int(nil), g.seen...), nil
	}
	return nil, nil
}

func blockingSilo(t *testing.T, st *slowStore, opts ...silo.KindOption) *silo.Silo {
	return blockingSiloBound(t, st, 0, opts...)
}

func blockingSiloBound(t *testing.T, st *slowStore, bound int, opts ...silo.KindOption) *silo.Silo {
	return newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour, IdleTimeout: -1, MaxBlockingTurns: bound}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "io", func(grain.ID) *blockingGrain { return &blockingGrain{st: st} }, opts...))
	})
}

// The turns of a kind WithBlockingTurns start off their partition: 200
// grains each asked once, each turn waiting 2 ms on a store, run side by
// side — at most 64 started off the partition at once, and one more on it
// — where without the option they ran one after another, 400 ms of the
// bubble's time (the watchdog, at an hour, never hands one off).
func TestABlockingKindsTurnsRunSideBySide(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		t.Run(fmt.Sprintf("blocking=%v", blocking), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &slowStore{wait: 2 * time.Millisecond}
				var opts []silo.KindOption
				if blocking {
					opts = append(opts, silo.WithBlockingTurns())
				}
				s := blockingSilo(t, st, opts...)
				const n = 200
				askEach(t, s, "io", n) // active first: the activations are not what is timed
				t0 := time.Now()
				askAllAtOnce(t, s, "io", n)
				took := time.Since(t0)
				if !blocking {
					assert.Equal(t, int32(1), st.most.Load(), "turns under way at once")
					assert.Equal(t, n*2*time.Millisecond, took)
					return
				}
				assert.Greater(t, st.most.Load(), int32(32), "turns under way at once")
				assert.LessOrEqual(t, st.most.Load(), int32(65), "turns under way at once: 64 off the partition, and one on it")
				assert.Less(t, took, 40*time.Millisecond)
			})
		})
	}
}

// A grain of a kind WithBlockingTurns still runs one turn at a time, its
// messages in the order they were sent, each turn off the partition.
func TestABlockingKindsGrainKeepsItsTurnsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowStore{wait: time.Millisecond}
		s := blockingSilo(t, st, silo.WithBlockingTurns())
		ctx := context.Background()
		id := grain.NewID("io", "one")
		const n = 100
		for i := range n {
			require.NoError(t, s.Tell(ctx, id, i))
		}
		seen, err := silo.Call[[]int](ctx, s, id, get{})
		require.NoError(t, err)
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		assert.Equal(t, want, seen)
		assert.Equal(t, int32(1), st.most.Load(), "its turns overlapped")
		assert.GreaterOrEqual(t, s.Stats().Handoffs, uint64(n), "its turns went off the partition")
	})
}

// Config.MaxBlockingTurns bounds the turns started off a partition at
// once; negative, there is no bound, and every turn of 200 waits at once.
func TestMaxBlockingTurnsBoundsTheTurnsOff(t *testing.T) {
	for _, tc := range []struct {
		bound    int
		min, max int32
	}{{8, 8, 9}, {-1, 200, 200}} {
		t.Run(fmt.Sprintf("bound=%d", tc.bound), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &slowStore{wait: 2 * time.Millisecond}
				s := blockingSiloBound(t, st, tc.bound, silo.WithBlockingTurns())
				const n = 200
				askEach(t, s, "io", n)
				askAllAtOnce(t, s, "io", n)
				assert.GreaterOrEqual(t, st.most.Load(), tc.min, "turns under way at once")
				assert.LessOrEqual(t, st.most.Load(), tc.max, "turns under way at once")
			})
		})
	}
}
