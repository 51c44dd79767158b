package silo_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// tenant is a grain that reports its deactivations, and can keep itself
// alive or block a turn.
type tenant struct {
	gone  chan<- string
	state []byte
}

type (
	keepFor time.Duration
	ballast int
)

func (g *tenant) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case keepFor:
		gc.DelayDeactivation(time.Duration(m))
	case ballast:
		g.state = make([]byte, m)
		for i := range g.state { // touched, so the memory is really in use
			g.state[i] = byte(i)
		}
	case block:
		<-m.until
	}
	return nil, nil
}

func (g *tenant) OnDeactivate(_ context.Context, gc *grain.Context) error {
	g.gone <- gc.ID().Key()
	return nil
}

// memSilo is a one-partition silo on a manual clock, ticking every second,
// whose gauge reads *used; "tenant" grains go idle after a minute, "pinned"
// ones never.
func memSilo(t *testing.T, limit int64, gauge silo.MemoryGauge, logger ...*slog.Logger) (*silo.Silo, *clock.Manual, chan string) {
	t.Helper()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gone := make(chan string, 1024)
	cfg := silo.Config{
		Clock: clk, Partitions: 1, IdleTimeout: time.Minute, IdleQuantum: time.Second,
		MemoryLimit: limit, MemoryGauge: gauge,
	}
	if len(logger) > 0 {
		cfg.Logger = logger[0]
	}
	s := newSilo(t, cfg, func(s *silo.Silo) {
		newTenant := func(grain.ID) *tenant { return &tenant{gone: gone} }
		require.NoError(t, silo.Register(s, "tenant", newTenant))
		require.NoError(t, silo.Register(s, "pinned", newTenant, silo.WithIdleTimeout(-1)))
	})
	return s, clk, gone
}

// idleTickNow moves the clock one idle quantum and waits until the partition has
// handled the tick: an ask behind it is a barrier, since the owner drains
// control items (the tick) before messages.
func idleTickNow(t *testing.T, s *silo.Silo, clk *clock.Manual) {
	t.Helper()
	clk.Advance(time.Second)
	_, err := s.Ask(ctxT(t), grain.NewID("pinned", "barrier"), "sync")
	require.NoError(t, err)
}

// drained returns what gone holds now.
func drained[T any](gone chan T) []T {
	var out []T
	for {
		select {
		case k := <-gone:
			out = append(out, k)
		default:
			return out
		}
	}
}

// Above the limit, the grains nearest their idle deadline go first, as many
// as would bring memory to 90 % of the limit were it spread evenly; within
// it, nothing goes.
func TestShedsTheLeastRecentlyActiveUnderMemoryPressure(t *testing.T) {
	var used atomic.Uint64
	logged := &syncBuffer{}
	s, clk, gone := memSilo(t, 1000, silo.MemoryGaugeFunc(used.Load), newTextLogger(logged))
	ctx := ctxT(t)
	for i := range 10 { // t0 active 5 s before t1, ... t9 last
		_, err := s.Ask(ctx, grain.NewID("tenant", fmt.Sprint("t", i)), "hi")
		require.NoError(t, err)
		clk.Advance(5 * time.Second)
	}
	used.Store(1000) // at the limit: within it
	idleTickNow(t, s, clk)
	assert.Empty(t, drained(gone))

	// 1250 against a target of 900: 28 % of the 11 activations (the
	// barrier included, which never goes idle) is 4 grains.
	used.Store(1250)
	idleTickNow(t, s, clk)
	require.EqualValues(t, 4, s.Stats().Shed)
	assert.ElementsMatch(t, []string{"t0", "t1", "t2", "t3"}, []string{<-gone, <-gone, <-gone, <-gone})
	// A barrier: the last OnDeactivate has returned and its grain is gone
	// from the directory (its hook reports before that).
	_, err := s.Ask(ctx, grain.NewID("pinned", "barrier"), "sync")
	require.NoError(t, err)
	assert.Equal(t, 6, s.Stats().Activations["tenant"])

	used.Store(950)
	idleTickNow(t, s, clk)
	assert.Empty(t, drained(gone), "below the limit, though above the target")
	assert.EqualValues(t, 4, s.Stats().Shed)
	s.WaitLogged()
	assert.Regexp(t, `(?s)level=WARN msg="granary: memory above Config.MemoryLimit: shedding idle activations" in_use=1250 limit=1000.*`+
		`level=INFO msg="granary: memory back within Config.MemoryLimit" in_use=950`, logged.String())
}

// Only what idle collection could take now is shed: not a grain whose turn
// runs, nor one kept by DelayDeactivation, nor one that never goes idle.
func TestSheddingSparesBusyKeptAndPinnedGrains(t *testing.T) {
	var used atomic.Uint64
	s, clk, gone := memSilo(t, 1000, silo.MemoryGaugeFunc(used.Load))
	ctx := ctxT(t)
	for _, id := range []grain.ID{grain.NewID("pinned", "p1"), grain.NewID("pinned", "p2"), grain.NewID("tenant", "kept")} {
		_, err := s.Ask(ctx, id, "hi")
		require.NoError(t, err)
	}
	_, err := s.Ask(ctx, grain.NewID("tenant", "kept"), keepFor(time.Hour))
	require.NoError(t, err)
	release := make(chan struct{})
	defer close(release)
	require.NoError(t, s.Tell(ctx, grain.NewID("tenant", "busy"), block{release}))
	_, err = s.Ask(ctx, grain.NewID("tenant", "free"), "hi")
	require.NoError(t, err)

	used.Store(100_000) // far over: every activation's share
	for range 3 {
		idleTickNow(t, s, clk)
	}
	assert.Equal(t, "free", <-gone)
	idleTickNow(t, s, clk)
	assert.Empty(t, drained(gone))
	assert.EqualValues(t, 1, s.Stats().Shed)
	assert.Equal(t, 3, s.Stats().Activations["pinned"])
	assert.Equal(t, 2, s.Stats().Activations["tenant"])
}

// With the default gauge, the Go heap's live bytes after the last GC: a
// silo whose grains hold more than the limit sheds them, and after a shed
// waits for a GC's figure before it sheds again.
func TestShedsOnTheLiveHeap(t *testing.T) {
	const grains, each = 64, 1 << 20 // 64 MB of state
	s, clk, gone := memSilo(t, 32<<20, nil)
	ctx := ctxT(t)
	for i := range grains {
		_, err := s.Ask(ctx, grain.NewIntID("tenant", int64(i)), ballast(each))
		require.NoError(t, err)
	}
	runtime.GC() // a fresh figure: at least the 64 MB the grains hold
	figure := gcCycles()
	idleTickNow(t, s, clk)
	first := s.Stats().Shed
	// At least the share that brings 64 MB to 29 MB: over half.
	assert.GreaterOrEqual(t, first, uint64(grains/2))

	idleTickNow(t, s, clk) // no GC since: the same figure, which shed already
	if gcCycles() == figure {
		assert.Equal(t, first, s.Stats().Shed)
	} else {
		// A GC ended between the ticks — the one the second tick asks
		// for, the heap still past the limit with its garbage, or one of
		// the runtime's own — and a look since (lookSoon) may rightly
		// have shed again on its fresh figure: under -race about half
		// the runs; failed so once in CI, 52 shed against 37.
		t.Log("a GC between the ticks: not the same figure")
	}
	assert.NotEmpty(t, drained(gone))
	runtime.GC() // what was shed is freed: within the limit now, or near
	idleTickNow(t, s, clk)
	assert.Less(t, s.Stats().Activations["tenant"], grains)
}

// The live heap is only measured by a GC. With the GC off, a heap grown
// past the limit would never be heard of; the silo asks for a GC, and
// sheds on its figure at a later tick.
func TestAsksForAGCWhenTheHeapPassesTheLimit(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const grains, each = 48, 1 << 20
	s, clk, _ := memSilo(t, 16<<20, nil)
	ctx := ctxT(t)
	idleTickNow(t, s, clk) // a first look, on the last GC's figure
	for i := range grains {
		_, err := s.Ask(ctx, grain.NewIntID("tenant", int64(i)), ballast(each))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		idleTickNow(t, s, clk)
		return s.Stats().Shed > 0
	}, 10*time.Second, time.Millisecond, "no GC but the silo's can show the heap live")
}

// When shedding takes nothing — every grain kept alive — the silo stops
// asking for GCs that would free nothing of its, until a shed can take
// something again.
func TestAsksForNoGCWhileSheddingIsFutile(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const grains, each = 24, 1 << 20
	s, clk, _ := memSilo(t, 8<<20, nil)
	ctx := ctxT(t)
	for i := range grains {
		id := grain.NewIntID("tenant", int64(i))
		_, err := s.Ask(ctx, id, ballast(each))
		require.NoError(t, err)
		_, err = s.Ask(ctx, id, keepFor(time.Hour))
		require.NoError(t, err)
	}
	for range 2 { // two decisions on fresh figures: the second finds the first took nothing
		runtime.GC()
		idleTickNow(t, s, clk)
	}
	before := gcCycles()
	for range 10 {
		idleTickNow(t, s, clk)
	}
	require.NoError(t, s.Close()) // waits for any GC the silo asked for
	assert.Equal(t, before, gcCycles(), "no GC asked for while nothing can be shed")
	assert.Zero(t, s.Stats().Shed)
}

// A gauge that panics gives no reading: nothing is shed, it is logged, and
// idle collection goes on.
func TestAPanickingMemoryGaugeShedsNothing(t *testing.T) {
	logged := &syncBuffer{}
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gone := make(chan string, 16)
	s := newSilo(t, silo.Config{
		Clock: clk, Partitions: 1, IdleTimeout: 3 * time.Second, IdleQuantum: time.Second,
		MemoryLimit: 1, MemoryGauge: silo.MemoryGaugeFunc(func() uint64 { panic("no gauge") }),
		Logger: newTextLogger(logged),
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "tenant", func(grain.ID) *tenant { return &tenant{gone: gone} }))
		require.NoError(t, silo.Register(s, "pinned", func(grain.ID) *tenant { return &tenant{gone: gone} }, silo.WithIdleTimeout(-1)))
	})
	_, err := s.Ask(ctxT(t), grain.NewID("tenant", "a"), "hi")
	require.NoError(t, err)
	idleTickNow(t, s, clk)
	assert.Empty(t, drained(gone))
	s.WaitLogged()
	assert.Contains(t, logged.String(), "MemoryGauge panicked")
	for range 3 {
		idleTickNow(t, s, clk)
	}
	assert.Equal(t, "a", <-gone, "collected at its idle timeout")
	assert.Zero(t, s.Stats().Shed)
}

func TestMemoryLimitConfig(t *testing.T) {
	for name, cfg := range map[string]silo.Config{
		"negative limit":  {MemoryLimit: -1},
		"nil gauge func":  {MemoryGauge: silo.MemoryGaugeFunc(nil)},
		"nil gauge value": {MemoryGauge: (*fixedGauge)(nil)},
	} {
		_, err := silo.New(cfg)
		require.ErrorIs(t, err, grain.ErrInvalidConfig, name)
		assert.Contains(t, err.Error(), "Memory", "%s: the error names the field", name)
	}
	_, err := silo.New(silo.Config{MemoryLimit: 1 << 30, MemoryGauge: &fixedGauge{}})
	require.NoError(t, err)
}

type fixedGauge struct{ n uint64 }

func (g *fixedGauge) MemoryInUse() uint64 { return g.n }

// A gauge that does not answer holds up no idle collection: each tick waits
// for it a moment and goes on without a reading, and the silo never calls
// it twice at once — the ticks after take the answer of the call that is
// out, once it comes. (The ticks waited for it: a grain idle past its
// timeout stayed active for as long as the gauge blocked.)
func TestAGaugeThatBlocksHoldsUpNoIdleCollection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var calls atomic.Int32
		gauge := silo.MemoryGaugeFunc(func() uint64 {
			if calls.Add(1) == 1 {
				<-gate
			}
			return 0
		})
		s, deact, _ := bubbleSilo(t, silo.Config{IdleTimeout: time.Minute, IdleQuantum: time.Second, MemoryLimit: 1 << 40, MemoryGauge: gauge})
		_, err := s.Ask(t.Context(), grain.NewID("sleeper", "a"), "hello")
		require.NoError(t, err)
		start := time.Now()
		gone := <-deact
		assert.LessOrEqual(t, gone.Sub(start), time.Minute+2*time.Second, "collected at its idle timeout, a tick or so late")
		assert.EqualValues(t, 1, calls.Load(), "the first call is still out: no second one")
		close(gate)
		_, err = s.Ask(t.Context(), grain.NewID("sleeper", "b"), "hello") // ticks resume with a grain to collect
		require.NoError(t, err)
		time.Sleep(3 * time.Second) // three ticks: the one that takes the answer, then fresh calls
		synctest.Wait()
		assert.GreaterOrEqual(t, calls.Load(), int32(2), "once it answered, the gauge is called again")
	})
}

// While memory stays past the limit, the silo looks at it again between
// idle ticks — every 100 ms, not once a quantum — and sheds at each look:
// a burst of activations allocates a second's worth between two ticks.
// Back within the limit, it looks only at the ticks again.
func TestLooksAgainBetweenTicksWhileMemoryIsShort(t *testing.T) {
	var used, reads atomic.Uint64
	gauge := silo.MemoryGaugeFunc(func() uint64 { reads.Add(1); return used.Load() })
	s, clk, gone := memSilo(t, 1000, gauge)
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("pinned", "barrier"), "sync") // never shed
	require.NoError(t, err)
	for i := range 10 {
		_, err := s.Ask(ctx, grain.NewID("tenant", fmt.Sprint("t", i)), "hi")
		require.NoError(t, err)
		clk.Advance(5 * time.Second)
	}
	lookNow := func() {
		t.Helper()
		clk.Advance(100 * time.Millisecond)
		_, err := s.Ask(ctx, grain.NewID("pinned", "barrier"), "sync")
		require.NoError(t, err)
	}

	used.Store(1250) // 28 % over the target of 900: 4 of the 11 activations
	idleTickNow(t, s, clk)
	require.EqualValues(t, 4, s.Stats().Shed)
	assert.ElementsMatch(t, []string{"t0", "t1", "t2", "t3"}, []string{<-gone, <-gone, <-gone, <-gone})
	_, err = s.Ask(ctx, grain.NewID("pinned", "barrier"), "sync") // the four are gone
	require.NoError(t, err)

	// A tenth of a second on, still 1250 (what went is not freed yet, or
	// more came): 28 % of the 7 left, rounded up.
	lookNow()
	require.EqualValues(t, 6, s.Stats().Shed, "shed at a look between two ticks")
	assert.ElementsMatch(t, []string{"t4", "t5"}, []string{<-gone, <-gone})

	used.Store(950)
	lookNow()
	assert.EqualValues(t, 6, s.Stats().Shed)
	before := reads.Load()
	clk.Advance(500 * time.Millisecond) // no tick falls in it
	assert.Equal(t, before, reads.Load(), "within the limit, no look between ticks")
	assert.Empty(t, drained(gone))
}

// A look between ticks that finds nothing shed since the last one — every
// grain kept alive — stops the looks until the next tick: a gauge of the
// program's own, stuck above the limit, is read once a tick then, not ten
// times.
func TestLooksStopWhileSheddingIsFutile(t *testing.T) {
	var reads atomic.Uint64
	gauge := silo.MemoryGaugeFunc(func() uint64 { reads.Add(1); return 100_000 })
	s, clk, _ := memSilo(t, 1000, gauge)
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("tenant", "kept"), keepFor(time.Hour)) // idle-tracked, not sheddable
	require.NoError(t, err)

	idleTickNow(t, s, clk) // decides, and looks begin; the kept grain is not taken
	idleTickNow(t, s, clk) // nothing shed since the last look: futile
	before := reads.Load()
	clk.Advance(900 * time.Millisecond) // no tick falls in it
	assert.Equal(t, before, reads.Load(), "no look between ticks while shedding takes nothing")
	assert.Zero(t, s.Stats().Shed)
}

// gcCycles is how many GCs have ended in the process so far.
func gcCycles() uint64 {
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}
