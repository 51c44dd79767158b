package directory_test

import (
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/directory"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

type entry struct{ id grain.ID }

func newTable() *directory.Table[entry] {
	t, err := directory.NewTable[entry](func(e *entry) *grain.ID { return &e.id })
	if err != nil {
		panic(err)
	}
	return t
}

func TestNewTableRefusesANilIDOf(t *testing.T) {
	_, err := directory.NewTable[entry](nil)
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
}

func TestTableSingleEntryPerID(t *testing.T) {
	tb := newTable()
	a := &entry{grain.NewID("k", "a")}
	require.True(t, tb.Put(a.id, a.id.Hash(), a))
	require.False(t, tb.Put(a.id, a.id.Hash(), &entry{a.id}), "one activation per identity")
	got, ok := tb.Get(a.id, a.id.Hash())
	require.True(t, ok)
	assert.Same(t, a, got)
	tb.Delete(a.id, a.id.Hash())
	_, ok = tb.Get(a.id, a.id.Hash())
	assert.False(t, ok)
	assert.Zero(t, tb.Len())
}

// Two identities with the same hash still get their own entries.
func TestTableHashCollisions(t *testing.T) {
	tb := newTable()
	a, b, c := &entry{grain.NewID("k", "a")}, &entry{grain.NewID("k", "b")}, &entry{grain.NewID("k", "c")}
	const h = 42 // force a collision
	require.True(t, tb.Put(a.id, h, a))
	require.True(t, tb.Put(b.id, h, b))
	require.True(t, tb.Put(c.id, h, c))
	require.False(t, tb.Put(b.id, h, b))
	for _, e := range []*entry{a, b, c} {
		got, ok := tb.Get(e.id, h)
		require.True(t, ok)
		assert.Same(t, e, got)
	}
	assert.Equal(t, 3, tb.Len())
	tb.Delete(a.id, h)
	_, ok := tb.Get(a.id, h)
	assert.False(t, ok)
	got, ok := tb.Get(c.id, h)
	require.True(t, ok)
	assert.Same(t, c, got)
	seen := 0
	tb.All(func(grain.ID, *entry) bool { seen++; return true })
	assert.Equal(t, 2, seen)
}

// The table against a map, through random puts, gets and deletes with many
// forced hash collisions (few distinct hashes) and growing and shrinking.
func TestTableMatchesAMap(t *testing.T) {
	for _, hashes := range []uint64{3, 1 << 62} {
		rng := rand.New(rand.NewPCG(1, hashes))
		tb := newTable()
		model := map[grain.ID]*entry{}
		hash := func(id grain.ID) uint64 { return id.Hash() % hashes }
		for step := range 20000 {
			// Phases of mostly puts, then mostly deletes, so the table both
			// grows and shrinks.
			putBias := 70
			if step/2500%2 == 1 {
				putBias = 30
			}
			id := grain.NewIntID("k", rng.Int64N(2000))
			switch r := rng.IntN(100); {
			case r < putBias:
				e := &entry{id}
				_, had := model[id]
				require.Equal(t, !had, tb.Put(id, hash(id), e))
				if !had {
					model[id] = e
				}
			default:
				tb.Delete(id, hash(id))
				delete(model, id)
			}
			if step%997 == 0 {
				require.Equal(t, len(model), tb.Len())
				for id, e := range model {
					got, ok := tb.Get(id, hash(id))
					require.True(t, ok, "step %d: %v lost", step, id)
					require.Same(t, e, got)
				}
			}
		}
		// All, deleting every other entry as it goes, sees each entry once.
		seen := map[grain.ID]int{}
		i := 0
		tb.All(func(id grain.ID, e *entry) bool {
			seen[id]++
			require.Same(t, model[id], e)
			if i++; i%2 == 0 {
				tb.Delete(id, hash(id))
				delete(model, id)
			}
			return true
		})
		for id, n := range seen {
			require.Equal(t, 1, n, "%v visited %d times", id, n)
		}
		require.Equal(t, len(model), tb.Len())
		for id, e := range model {
			got, ok := tb.Get(id, hash(id))
			require.True(t, ok)
			require.Same(t, e, got)
		}
	}
}

func TestTableRefusesNil(t *testing.T) {
	tb := newTable()
	id := grain.NewID("k", "a")
	require.False(t, tb.Put(id, id.Hash(), nil))
	require.Zero(t, tb.Len())
}

func TestLocal(t *testing.T) {
	pt, err := queues.NewPartitioner(4)
	require.NoError(t, err)
	l := directory.Local{Silo: "s1", Partitioner: pt}
	id := grain.NewID("k", "x")
	loc, err := l.Locate(id)
	require.NoError(t, err)
	assert.Equal(t, directory.Location{Silo: "s1", Partition: pt.Partition(id)}, loc)
	// A LocatorFunc is a Locator: a cluster's directory, or a test's.
	var remote directory.Locator = directory.LocatorFunc(func(id grain.ID) (directory.Location, error) {
		return directory.Location{Silo: "s2", Partition: int(id.Hash() % 8)}, nil
	})
	got, err := remote.Locate(id)
	require.NoError(t, err)
	assert.Equal(t, "s2", got.Silo)

	_, err = directory.Local{Silo: "s1"}.Locate(id) // no partitioner: an error, not a division by zero
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
}

func BenchmarkTableGet(b *testing.B) {
	tb := newTable()
	ids := make([]grain.ID, 10000)
	hs := make([]uint64, len(ids))
	for i := range ids {
		ids[i] = grain.NewIntID("k", int64(i))
		hs[i] = ids[i].Hash()
		tb.Put(ids[i], hs[i], &entry{ids[i]})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(ids)
		if _, ok := tb.Get(ids[j], hs[j]); !ok {
			b.Fatal("missing")
		}
	}
}

// Guess finds an entry with the hash, or nil; HomeAddr points into the table.
// Both are only for prefetching, so a wrong guess on a collision is allowed.
func TestTableGuessAndHomeAddr(t *testing.T) {
	tb := newTable()
	a, b := &entry{grain.NewID("k", "a")}, &entry{grain.NewID("k", "b")}
	require.True(t, tb.Put(a.id, 7, a))
	require.True(t, tb.Put(b.id, 7, b)) // same hash: Guess may give either
	g := tb.Guess(7)
	require.True(t, g == a || g == b)
	require.Nil(t, tb.Guess(12345))
	require.NotZero(t, tb.HomeAddr(7))
	require.Equal(t, tb.HomeAddr(7), tb.HomeAddr(7))
}

// Deletes moves only when an entry leaves: a caller that kept a Guess
// knows by it whether the entry may be gone.
func TestTableDeletesCountsRemovals(t *testing.T) {
	tb := newTable()
	require.Zero(t, tb.Deletes())
	var es []*entry
	for i := range 100 { // growing too: moves are no removals
		e := &entry{grain.NewIntID("k", int64(i))}
		es = append(es, e)
		require.True(t, tb.Put(e.id, e.id.Hash(), e))
	}
	require.False(t, tb.Put(es[0].id, es[0].id.Hash(), es[0]))
	require.Zero(t, tb.Deletes())
	tb.Delete(grain.NewID("k", "absent"), 1) // nothing to remove
	require.Zero(t, tb.Deletes())
	for i, e := range es { // shrinking too
		tb.Delete(e.id, e.id.Hash())
		require.Equal(t, uint64(i+1), tb.Deletes())
	}
	tb.Delete(es[0].id, es[0].id.Hash()) // gone already
	require.Equal(t, uint64(len(es)), tb.Deletes())
}

// Removing entries in the order All visits them — a shutdown deactivates a
// partition's grains in that order — leaves those with the highest homes.
// Rehashed into half the slots with the same multiplier, they ran together
// into one cluster as long as the table had entries, which every later
// removal scanned (a million grains took 5.7 s to shut down). A new
// multiplier at each resize spreads them again.
func TestRemovalInSlotOrderKeepsProbeRunsShort(t *testing.T) {
	tb := newTable()
	const n = 100_000
	for i := range n {
		e := &entry{id: grain.NewIntID("k", int64(i))}
		require.True(t, tb.Put(e.id, e.id.Hash(), e))
	}
	var order []*entry
	tb.All(func(_ grain.ID, e *entry) bool { order = append(order, e); return true })
	longest := 0
	for i, e := range order {
		tb.Delete(e.id, e.id.Hash())
		if i%1000 == 0 {
			longest = max(longest, directory.LongestRun(tb))
		}
	}
	assert.Zero(t, tb.Len())
	assert.Less(t, longest, 200, "probe runs stay short through every shrink")
}

// Growth moves entries a few probe runs at a time: every operation, and an
// All at any moment (deleting as it goes), must see the table as a map
// would, whichever array an entry is in.
func TestTableMatchesAMapWhileGrowing(t *testing.T) {
	for _, hashes := range []uint64{5, 1 << 62} {
		rng := rand.New(rand.NewPCG(2, hashes))
		tb := newTable()
		model := map[grain.ID]*entry{}
		hash := func(id grain.ID) uint64 { return id.Hash() % hashes }
		check := func(step int) {
			t.Helper()
			require.Equal(t, len(model), tb.Len(), "step %d", step)
			for id, e := range model {
				got, ok := tb.Get(id, hash(id))
				require.True(t, ok, "step %d: %v lost", step, id)
				require.Same(t, e, got)
			}
		}
		for step := range 30000 {
			putBias := 80 // mostly growth, with deletions mixed in
			if step/6000%2 == 1 {
				putBias = 25
			}
			id := grain.NewIntID("k", rng.Int64N(5000))
			switch r := rng.IntN(1000); {
			case r == 0: // an All, deleting one entry in three, mid-growth or not
				seen := map[grain.ID]bool{}
				i := 0
				tb.All(func(id grain.ID, e *entry) bool {
					require.False(t, seen[id], "step %d: %v visited twice", step, id)
					seen[id] = true
					require.Same(t, model[id], e)
					if i++; i%3 == 0 {
						tb.Delete(id, hash(id))
						delete(model, id)
					}
					return true
				})
				require.Len(t, seen, len(model)+i/3, "step %d: All saw every entry", step)
				check(step)
			case r < 5: // AppendValues lists what All visits, mid-growth or not
				got := map[*entry]bool{}
				for _, e := range tb.AppendValues(nil) {
					require.False(t, got[e], "step %d: %v listed twice", step, e.id)
					got[e] = true
				}
				require.Len(t, got, len(model), "step %d", step)
				for _, e := range model {
					require.True(t, got[e], "step %d: %v not listed", step, e.id)
				}
			case r < putBias*10:
				e := &entry{id}
				_, had := model[id]
				require.Equal(t, !had, tb.Put(id, hash(id), e), "step %d", step)
				if !had {
					model[id] = e
				}
			default:
				tb.Delete(id, hash(id))
				delete(model, id)
			}
			got, ok := tb.Get(id, hash(id))
			want, had := model[id]
			require.Equal(t, had, ok, "step %d: %v", step, id)
			if had {
				require.Same(t, want, got)
			}
			if step%499 == 0 {
				check(step)
			}
		}
		check(-1)
	}
}

// BenchmarkTablePut: a table growing from empty to 100,000 entries, per
// entry: the rehashing of its growth included.
func BenchmarkTablePut(b *testing.B) { benchPut(b, 100_000, false) }

// BenchmarkTablePutFreshMemory: BenchmarkTablePut at 500,000 entries, the
// size of a partition's table in the bench module's `activate`, with the
// process's free memory given back to the OS before each round, so that
// every array the table grows into comes fresh from the OS, as it does
// for a silo whose grains outgrow what it ever held.
func BenchmarkTablePutFreshMemory(b *testing.B) { benchPut(b, 500_000, true) }

func benchPut(b *testing.B, n int, fresh bool) {
	es := make([]entry, n)
	hs := make([]uint64, n)
	for i := range es {
		es[i].id = grain.NewIntID("k", int64(i))
		hs[i] = es[i].id.Hash()
	}
	b.ReportAllocs()
	for b.Loop() {
		if fresh {
			b.StopTimer()
			debug.FreeOSMemory()
			b.StartTimer()
		}
		tb := newTable()
		for i := range es {
			tb.Put(es[i].id, hs[i], &es[i])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
