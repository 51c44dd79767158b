package idle_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/idle"
)

func values(es []*idle.Entry[int]) []int {
	out := make([]int, 0, len(es))
	for _, e := range es {
		out = append(out, e.Value)
	}
	return out
}

func TestWheelExpiresNeverEarly(t *testing.T) {
	w, err := idle.NewWheel[int](time.Second, 8, 0)
	require.NoError(t, err)
	a, b := &idle.Entry[int]{Value: 1}, &idle.Entry[int]{Value: 2}
	w.Touch(a, 3*time.Second)
	w.Touch(b, 2500*time.Millisecond)
	assert.Equal(t, 2, w.Len())
	assert.Empty(t, w.Advance(2*time.Second, nil))
	assert.Empty(t, w.Advance(2900*time.Millisecond, nil), "b's deadline rounds up to the 3 s tick")
	assert.ElementsMatch(t, []int{1, 2}, values(w.Advance(3*time.Second, nil)))
	assert.Zero(t, w.Len())
	assert.False(t, a.Tracked())
}

func TestWheelTouchMovesDeadline(t *testing.T) {
	w, _ := idle.NewWheel[int](time.Second, 4, 0)
	a := &idle.Entry[int]{Value: 1}
	w.Touch(a, 2*time.Second)
	w.Touch(a, 11*time.Second) // later: lazy, found again at 2 s and re-filed
	assert.Empty(t, w.Advance(10*time.Second, nil))
	assert.Equal(t, []int{1}, values(w.Advance(11*time.Second, nil)))

	b := &idle.Entry[int]{Value: 2}
	w.Touch(b, 30*time.Second)
	w.Touch(b, 12*time.Second) // earlier: re-filed at once
	assert.Equal(t, []int{2}, values(w.Advance(12*time.Second, nil)))

	c := &idle.Entry[int]{Value: 3}
	w.Touch(c, 20*time.Second)
	w.Remove(c)
	w.Remove(c) // twice is fine
	assert.Empty(t, w.Advance(40*time.Second, nil))
	assert.Zero(t, w.Len())
}

// A randomized check against a plain model: every entry expires at the first
// Advance at or after its deadline's tick, never before.
func TestWheelAgainstModel(t *testing.T) {
	const q = 10 * time.Millisecond
	r := rand.New(rand.NewPCG(1, 2))
	w, _ := idle.NewWheel[int](q, 16, 0)
	entries := make([]*idle.Entry[int], 200)
	deadline := map[int]time.Duration{}
	now := time.Duration(0)
	for i := range entries {
		entries[i] = &idle.Entry[int]{Value: i}
	}
	for step := 0; step < 2000; step++ {
		i := r.IntN(len(entries))
		d := now + time.Duration(r.IntN(500))*time.Millisecond
		w.Touch(entries[i], d)
		deadline[i] = d
		now += time.Duration(r.IntN(30)) * time.Millisecond
		for _, e := range w.Advance(now, nil) {
			dl, ok := deadline[e.Value]
			require.True(t, ok)
			require.LessOrEqual(t, dl, now, "expired early")
			delete(deadline, e.Value)
		}
		for v, dl := range deadline {
			ceil := (dl + q - 1) / q * q
			require.Greater(t, ceil, now, "entry %d missed: deadline %v now %v", v, dl, now)
		}
	}
}

// Each visits every tracked entry once, stale ones (touched later, filed
// under an old slot) included, and stops when asked.
func TestWheelEachVisitsEveryEntry(t *testing.T) {
	w, _ := idle.NewWheel[int](time.Second, 4, 0)
	for i := range 10 {
		w.Touch(&idle.Entry[int]{Value: i}, time.Duration(i+1)*time.Second)
	}
	moved := &idle.Entry[int]{Value: 10}
	w.Touch(moved, time.Second)
	w.Touch(moved, time.Hour)
	gone := &idle.Entry[int]{Value: 11}
	w.Touch(gone, 2*time.Second)
	w.Remove(gone)

	var seen []int
	w.Each(func(e *idle.Entry[int]) bool { seen = append(seen, e.Value); return true })
	assert.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seen)

	n := 0
	w.Each(func(*idle.Entry[int]) bool { n++; return n < 3 })
	assert.Equal(t, 3, n)
}

// At the edges of a Duration's range the wheel still works: a wheel made at
// a negative offset counts negative ticks into its slots (a negative index
// before), an Advance to math.MaxInt64 ends instead of stepping past it
// (its loop's t++ wrapped), and a deadline in the past expires at the next
// Advance.
func TestWheelAtTheEdgesOfTime(t *testing.T) {
	w, err := idle.NewWheel[int](time.Nanosecond, 8, -time.Hour)
	require.NoError(t, err)
	past, late := &idle.Entry[int]{Value: 1}, &idle.Entry[int]{Value: 2}
	w.Touch(past, math.MinInt64)
	w.Touch(late, math.MaxInt64-1)
	assert.Equal(t, []int{1}, values(w.Advance(-time.Hour+time.Nanosecond, nil)))
	assert.Equal(t, []int{2}, values(w.Advance(math.MaxInt64, nil)))
	assert.Zero(t, w.Len())
	assert.Empty(t, w.Advance(math.MaxInt64, nil))

	// Past the last tick, an entry is kept, not filed before the cursor.
	last := &idle.Entry[int]{Value: 3}
	w.Touch(last, math.MaxInt64)
	assert.Equal(t, 1, w.Len())
	assert.Empty(t, w.Advance(math.MaxInt64, nil))
}

func TestNewWheelRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		q     time.Duration
		slots int
	}{{0, 0}, {-time.Second, 8}, {time.Second, -1}, {time.Second, idle.MaxSlots + 1}, {time.Second, math.MaxInt}} {
		_, err := idle.NewWheel[int](c.q, c.slots, 0)
		require.ErrorIs(t, err, grain.ErrInvalidConfig, "quantum %v, %d slots", c.q, c.slots)
	}
}

func BenchmarkWheelTouch(b *testing.B) {
	w, _ := idle.NewWheel[int](time.Second, 0, 0)
	es := make([]idle.Entry[int], 1024)
	for i := range es {
		w.Touch(&es[i], time.Minute)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Touch(&es[i&1023], time.Minute+time.Duration(i))
	}
}

// AdvanceAtMost against the same model, in slices of a few entries, with
// entries touched (later and earlier), removed and added between the
// slices of one advance: it never expires an entry early, never more than
// its limit at a call, and once it reports no more, nothing due is left.
func TestWheelAdvanceAtMostAgainstModel(t *testing.T) {
	const q = 10 * time.Millisecond
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		w, _ := idle.NewWheel[int](q, 8, 0)
		entries := make([]*idle.Entry[int], 300)
		deadline := map[int]time.Duration{}
		due := map[int]time.Duration{} // by when it must have expired
		for i := range entries {
			entries[i] = &idle.Entry[int]{Value: i}
		}
		var at, done time.Duration // now, and the now of the last Advance that finished
		touch := func() {
			i := r.IntN(len(entries))
			d := at + time.Duration(r.IntN(400))*time.Millisecond
			w.Touch(entries[i], d)
			deadline[i] = d
			// Never early: a deadline in a tick the wheel has passed is
			// due at its next tick.
			due[i] = max((d+q-1)/q*q, done/q*q+q)
		}
		for range 400 {
			for range r.IntN(20) {
				touch()
			}
			at += time.Duration(r.IntN(60)) * time.Millisecond
			for more := true; more; {
				limit := 1 + r.IntN(4)
				var got []*idle.Entry[int]
				got, more = w.AdvanceAtMost(at, limit, nil)
				require.LessOrEqual(t, len(got), limit)
				for _, e := range got {
					dl, ok := deadline[e.Value]
					require.True(t, ok, "seed %d: entry %d expired twice or untracked", seed, e.Value)
					require.LessOrEqual(t, dl, at, "seed %d: expired early", seed)
					delete(deadline, e.Value)
					delete(due, e.Value)
				}
				if more { // the owner serves other work between slices
					switch r.IntN(3) {
					case 0:
						touch()
					case 1:
						i := r.IntN(len(entries))
						w.Remove(entries[i])
						delete(deadline, i)
						delete(due, i)
					}
				}
			}
			done = at
			for v, d := range due {
				require.Greater(t, d, at, "seed %d: entry %d missed: deadline %v now %v", seed, v, deadline[v], at)
			}
			require.Equal(t, len(deadline), w.Len())
		}
	}
}

// Expiring a burst in slices costs what expiring it at once does: a slice
// goes on where the last stopped, past the entries that stay in the slot
// (due a turn of the wheel later), rather than visiting them again.
func BenchmarkWheelAdvanceInSlices(b *testing.B) {
	const n, slots = 100_000, 512
	for _, limit := range []int{n, 1024, 16} {
		b.Run(fmt.Sprint(limit), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				w, _ := idle.NewWheel[int](time.Second, slots, 0)
				es := make([]idle.Entry[int], 2*n)
				for i := range es {
					d := time.Second // due at the first tick
					if i%2 == 1 {
						d += slots * time.Second // the same slot, a turn later: stays
					}
					w.Touch(&es[i], d)
				}
				buf := make([]*idle.Entry[int], 0, limit)
				b.StartTimer()
				for more := true; more; {
					buf, more = w.AdvanceAtMost(time.Second, limit, buf[:0])
				}
			}
		})
	}
}

// A pass of EachAtMost in slices, the wheel changing between them as an
// owner's other work changes it: every entry tracked throughout the pass
// and left alone is visited exactly once, and nothing is visited that is
// not tracked, or more often than once and once for each change to it.
func TestWheelEachAtMostAgainstModel(t *testing.T) {
	const q = 10 * time.Millisecond
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 11))
		w, _ := idle.NewWheel[int](q, 1+r.IntN(8), 0)
		entries := make([]*idle.Entry[int], 200)
		for i := range entries {
			entries[i] = &idle.Entry[int]{Value: i}
		}
		// fresh: filed by its last Touch. Touched again while tracked, an
		// entry may stay filed in its old slot until an Advance re-files it.
		fresh := make([]bool, len(entries))
		touch := func(i int, d time.Duration) {
			fresh[i] = !entries[i].Tracked()
			w.Touch(entries[i], d)
		}
		var at time.Duration
		for range 50 {
			for range r.IntN(200) {
				touch(r.IntN(len(entries)), at+time.Duration(r.IntN(300))*time.Millisecond)
			}
			// Left alone: tracked and filed where its deadline is at the
			// start, and not changed since.
			alone := map[int]bool{}
			seen, changes := map[int]int{}, map[int]int{}
			for i, e := range entries {
				switch {
				case e.Tracked() && fresh[i]:
					alone[i] = true
				case e.Tracked():
					changes[i] = 1 // an Advance may re-file it
				}
			}
			for more := true; more; {
				limit := 1 + r.IntN(5)
				n := 0
				more = w.EachAtMost(limit, func(e *idle.Entry[int]) bool {
					require.True(t, e.Tracked(), "seed %d: entry %d visited untracked", seed, e.Value)
					seen[e.Value]++
					n++
					return true
				})
				require.LessOrEqual(t, n, limit)
				if !more {
					break
				}
				for range r.IntN(3) { // the owner serves other work between slices
					i := r.IntN(len(entries))
					switch r.IntN(4) {
					case 0:
						touch(i, at+time.Duration(r.IntN(300))*time.Millisecond)
					case 1:
						w.Remove(entries[i])
					case 2:
						at += time.Duration(r.IntN(40)) * time.Millisecond
						for _, e := range w.Advance(at, nil) {
							delete(alone, e.Value)
							changes[e.Value]++
						}
						continue
					default:
						continue
					}
					delete(alone, i)
					changes[i]++
				}
			}
			for v, c := range seen {
				require.LessOrEqual(t, c, 1+changes[v], "seed %d: entry %d visited %d times", seed, v, c)
			}
			for v := range alone {
				require.Equal(t, 1, seen[v], "seed %d: entry %d left alone, visited %d times", seed, v, seen[v])
			}
		}
	}
}

// A pass ends when f returns false or at EndEach: the next call begins
// another from the start.
func TestWheelEachAtMostBeginsAgainAfterAPassEnds(t *testing.T) {
	w, _ := idle.NewWheel[int](time.Second, 4, 0)
	empty, _ := idle.NewWheel[int](time.Second, 4, 0)
	assert.False(t, empty.EachAtMost(1, func(*idle.Entry[int]) bool { t.Fatal("visited"); return true }))
	for i := range 6 {
		w.Touch(&idle.Entry[int]{Value: i}, time.Duration(i+1)*time.Second)
	}
	pass := func(limit int, stopAt int) (seen []int, more bool) {
		more = w.EachAtMost(limit, func(e *idle.Entry[int]) bool {
			seen = append(seen, e.Value)
			return e.Value != stopAt
		})
		return seen, more
	}
	first, more := pass(4, -1)
	require.True(t, more)
	require.Len(t, first, 4)
	rest, more := pass(4, -1)
	require.False(t, more)
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5}, append(first, rest...))

	// f returning false ends the pass.
	seen, more := pass(10, first[1])
	require.False(t, more)
	require.Equal(t, first[:2], seen)
	again, _ := pass(1, -1)
	require.Equal(t, first[:1], again, "a new pass begins at the start")

	w.EndEach()
	again, _ = pass(2, -1)
	require.Equal(t, first[:2], again, "EndEach: a new pass begins at the start")

	// limit below one still visits one entry.
	w.EndEach()
	again, more = pass(0, -1)
	require.True(t, more)
	require.Equal(t, first[:1], again)
}
