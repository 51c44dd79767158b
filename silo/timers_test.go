package silo_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
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

// A partition keeps its grains' timers in one heap under one clock timer
// (silo/timers.go): ticks come in due order across grains and within one,
// a grain with many timers (past the list it searches in order) finds each
// by name to stop or replace it, and a grain's timers leave the heap with
// it.
func TestManyTimersOnOnePartitionTickInDueOrder(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ticks := make(chan string, 1000)
	var overlaps atomic.Int64
	j := newJournal()
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ticker", func(grain.ID) *ticker { return &ticker{guard: turnGuard{overlaps: &overlaps}, ticks: ticks, j: j} }))
	})
	ctx := ctxT(t)
	call := func(id grain.ID, m any) {
		t.Helper()
		_, err := s.Ask(ctx, id, m)
		require.NoError(t, err)
	}
	a, b := grain.NewID("ticker", "a"), grain.NewID("ticker", "b")
	// a: twenty one-shot timers, due 1 s apart, started out of order; b:
	// one between each two of them.
	for _, i := range []int{7, 3, 19, 0, 12, 5, 16, 1, 9, 14, 2, 18, 4, 11, 6, 17, 8, 13, 10, 15} {
		call(a, startTimer{fmt.Sprintf("a%02d", i), time.Duration(2*i+2) * time.Second, 0})
		call(b, startTimer{fmt.Sprintf("b%02d", i), time.Duration(2*i+3) * time.Second, 0})
	}
	// Stop three of a's, and move one of b's to the end.
	call(a, stopTimer{"a04"})
	call(a, stopTimer{"a11"})
	call(a, stopTimer{"a19"})
	call(b, startTimer{"b00", 100 * time.Second, 0})
	var want []string
	for i := range 20 {
		if i != 4 && i != 11 && i != 19 {
			want = append(want, fmt.Sprintf("a%02d", i))
		}
		if i != 0 {
			want = append(want, fmt.Sprintf("b%02d", i))
		}
	}
	want = append(want, "b00")
	var got []string
	for range 100 {
		clk.Advance(time.Second)
		call(a, get{}) // a barrier: the ticks now due have run
		call(b, get{})
		for len(ticks) > 0 {
			got = append(got, <-ticks)
		}
	}
	assert.Equal(t, want, got)
	assert.Zero(t, overlaps.Load())

	// A repeating timer keeps ticking; a grain's timers go with it.
	call(a, startTimer{"every", time.Second, time.Second})
	for range 3 {
		clk.Advance(time.Second)
		call(a, get{})
	}
	require.Len(t, ticks, 3)
	for len(ticks) > 0 {
		<-ticks
	}
	require.NoError(t, s.Deactivate(ctx, a))
	require.Equal(t, "ticker", <-j.deact)
	clk.Advance(10 * time.Second)
	call(b, get{})
	assert.Empty(t, ticks, "no tick for a grain that has gone")
	assert.Zero(t, clk.Pending(), "no clock timer armed with no grain timer running")
}

// farTicker counts its ticks by timer name; a timer that ticks more than
// once when it should tick once is stopped, so that a runaway fails the
// test instead of spinning the partition.
type farTicker struct {
	mu    sync.Mutex
	ticks map[string]int
}

func (g *farTicker) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case startTimer:
		return nil, c.StartTimer(m.name, m.due, m.period, tickMsg{m.name})
	case tickMsg:
		g.mu.Lock()
		g.ticks[m.name]++
		if m.name == "once" && g.ticks[m.name] > 1 {
			c.StopTimer(m.name)
		}
		g.mu.Unlock()
	}
	return nil, nil
}

// A due or period too long for the silo's clock to add — math.MaxInt64,
// "not in this program's life" — is taken as about 146 years (maxSpan, as
// idle timeouts and DelayDeactivation are), not wrapped into the past: the
// timer never comes due, a repeating one ticks once, and the partition's
// other timers keep their times (the wrapped due sat at the top of the
// heap and held the partition's one clock timer for ever; the wrapped
// period made its tick due again at once, every turn).
func TestTimersFarInTheFutureNeverFireAndHoldUpNoOther(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &farTicker{ticks: map[string]int{}}
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "far", func(grain.ID) *farTicker { return g }))
	})
	ctx := ctxT(t)
	call := func(m any) {
		t.Helper()
		_, err := s.Ask(ctx, grain.NewID("far", "a"), m)
		require.NoError(t, err)
	}
	clk.Advance(time.Hour) // the silo's clock offset is past zero: sums overflow
	call(startTimer{"never", math.MaxInt64, 0})
	call(startTimer{"once", time.Second, math.MaxInt64})
	call(startTimer{"every", time.Second, time.Second})
	for range 5 {
		clk.Advance(time.Second)
		call(startTimer{"noop", time.Hour, 0}) // a barrier: the ticks now due have run
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Equal(t, map[string]int{"once": 1, "every": 5}, g.ticks)
}

// modelTicker records each tick with the timer's generation (which start
// made it) and when it came.
type modelTicker struct {
	mu    *sync.Mutex
	ticks map[string][]time.Duration // "grain/name#generation" -> when
	epoch time.Time
}

type (
	modelStart struct {
		name        string
		gen         int
		due, period time.Duration
	}
	modelTick struct {
		name string
		gen  int
	}
)

func (g *modelTicker) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case modelStart:
		return nil, c.StartTimer(m.name, m.due, m.period, modelTick{m.name, m.gen})
	case stopTimer:
		c.StopTimer(m.name)
	case modelTick:
		g.mu.Lock()
		k := fmt.Sprintf("%s/%s#%d", c.ID().Key(), m.name, m.gen)
		g.ticks[k] = append(g.ticks[k], time.Since(g.epoch))
		g.mu.Unlock()
	}
	return nil, nil
}

// Random starts, replacements and stops of timers on three grains, on one
// to three partitions, in a synctest bubble where a turn takes no time:
// every timer must tick exactly at its due time and then every period
// after (Orleans' rule: a period counts from the end of the tick's turn),
// until it is stopped or replaced, and never after. Starts and stops fall
// half a millisecond off the whole milliseconds every tick lands on, so
// no tick races the change that ends its timer.
func TestTimersFollowTheirModel(t *testing.T) {
	for seed := range 20 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { timerModelRun(t, uint64(seed)) })
		})
	}
}

func timerModelRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	ticks := map[string][]time.Duration{}
	epoch := time.Now()
	s, err := silo.New(silo.Config{Partitions: 1 + r.IntN(3), IdleTimeout: -1})
	require.NoError(t, err)
	require.NoError(t, silo.Register(s, "model", func(grain.ID) *modelTicker { return &modelTicker{&mu, ticks, epoch} }))
	require.NoError(t, s.Start())
	defer s.Close()
	ctx := context.Background()

	type generation struct{ start, due, period, stopped time.Duration } // stopped < 0: running
	model := map[string][]generation{}                                  // "grain/name" -> its starts
	const end = 2 * time.Second
	for time.Since(epoch) < end-300*time.Millisecond {
		// In the bubble, Sleep moves the clock: every timer due meanwhile
		// ticks first, at its time. It synchronises nothing.
		time.Sleep(time.Duration(1+r.IntN(50))*time.Millisecond + 501*time.Microsecond)
		now := time.Since(epoch)
		g, name := []string{"a", "b", "c"}[r.IntN(3)], []string{"w", "x", "y", "z"}[r.IntN(4)]
		key := g + "/" + name
		gens := model[key]
		if n := len(gens); n > 0 && gens[n-1].stopped < 0 {
			gens[n-1].stopped = now // stopped, or replaced by the start below
		}
		var msg any = stopTimer{name}
		if r.IntN(3) > 0 {
			due, period := time.Duration(r.IntN(40))*time.Millisecond, time.Duration(r.IntN(4))*7*time.Millisecond
			gens = append(gens, generation{start: now, due: due, period: period, stopped: -1})
			msg = modelStart{name, len(gens) - 1, due, period}
		}
		model[key] = gens
		_, err := s.Ask(ctx, grain.NewID("model", g), msg)
		require.NoError(t, err)
	}
	time.Sleep(end - time.Since(epoch))
	cutoff := time.Since(epoch)
	require.NoError(t, s.Shutdown(ctx))

	mu.Lock()
	defer mu.Unlock()
	for key, gens := range model {
		for i, g := range gens {
			k := fmt.Sprintf("%s#%d", key, i)
			stop := g.stopped
			if stop < 0 {
				stop = cutoff
			}
			var want []time.Duration
			for at := g.start + g.due; at < stop; at += g.period {
				want = append(want, at)
				if g.period == 0 {
					break
				}
			}
			assert.Equal(t, want, ticks[k], "%s: started at %v, due %v, period %v, stopped at %v", k, g.start, g.due, g.period, g.stopped)
			delete(ticks, k)
		}
	}
	assert.Empty(t, ticks, "ticks of no timer the model started")
}

// blockingTicker starts a timer when asked; its tick blocks until release
// is closed when the grain is "slow", and is reported on ticks.
type blockingTicker struct {
	slow    bool
	release <-chan struct{}
	ticks   chan<- string
}

func (g *blockingTicker) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case time.Duration:
		return nil, c.StartTimer("t", m, 0, "tick")
	case string:
		g.ticks <- c.ID().Key()
		if g.slow {
			<-g.release
		}
	}
	return nil, nil
}

// Timers fall due together on one partition and the first tick's turn
// blocks: the partition is handed off, and the new owner fires the ticks
// still due (partition.fireTimers pushes an opTimer for them), and later
// ones when they fall due, while the blocked one goes on — another grain's
// timer never waits for it.
func TestATickThatBlocksHoldsUpNoOtherTimer(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	release := make(chan struct{})
	ticks := make(chan string, 8)
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "bt", func(id grain.ID) *blockingTicker {
			return &blockingTicker{slow: id.Key() == "slow", release: release, ticks: ticks}
		}))
	})
	ctx := ctxT(t)
	for key, due := range map[string]time.Duration{"slow": time.Second, "fast1": time.Second + 1, "fast2": time.Second + 2, "later": 3 * time.Second} {
		_, err := s.Ask(ctx, grain.NewID("bt", key), due)
		require.NoError(t, err)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case k := <-ticks:
			return k
		case <-time.After(10 * time.Second): // real time: the watchdog hands off after 5 ms
			t.Fatal("a timer due waits for another grain's blocked tick")
			return ""
		}
	}
	clk.Advance(2 * time.Second) // all three due: slow's first
	require.Equal(t, "slow", next())
	got := []string{next(), next()} // while slow's tick still blocks
	assert.ElementsMatch(t, []string{"fast1", "fast2"}, got)
	clk.Advance(2 * time.Second) // a timer not due then falls due now: still no wait
	require.Equal(t, "later", next())
	close(release)
	released = true
	require.Positive(t, s.Stats().Handoffs)
}

// Timers that are always due — a period shorter than a tick's turn — keep
// their partition's owner firing ticks, and its other work still gets
// through: asks to another grain answered, the control lane not growing
// round by round (an opTimer queued before each tick with others due once
// fed itself: two queued for each one fired). With more timers than one
// slice of ticks (timerSlice, 256), a slice that stopped short queued its
// opTimer to go on while a tick of the slice had re-armed the clock wake,
// whose opTimer came as well: two for each, and asks to new grains waited
// seconds behind the flood of them (a thousand grains: 17 s to start them
// all, one ask 3.2 s).
func TestTimersAlwaysDueStarveNothing(t *testing.T) {
	for _, eager := range []int{200, 1000} {
		t.Run(fmt.Sprintf("timers=%d", eager), func(t *testing.T) {
			var n atomic.Int64
			s := newSilo(t, silo.Config{Partitions: 1, IdleTimeout: -1}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "eager", func(grain.ID) tickCounter { return tickCounter{&n} }))
				require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
			})
			// The check is the queue's depth as the timers start, not how
			// long they take (1.5–2 s under -race, past 20 s on one core
			// beside busy loops): with an opTimer queued for each one
			// fired, it passed 50 at the 30th or so.
			ctx := ctxT(t)
			short := func() {
				t.Helper()
				require.Less(t, s.Stats().QueueDepth[0], 50, "the partition's queue stays short")
			}
			for i := range eager {
				_, err := s.Ask(ctx, grain.NewIntID("eager", int64(i)), startEager{})
				require.NoError(t, err)
				short()
			}
			for range 50 {
				_, err := s.Ask(ctx, grain.NewID("counter", "other"), get{})
				require.NoError(t, err)
				short()
			}
			assert.Positive(t, n.Load())
		})
	}
}

// StartTimer refuses, in the turn that calls it, what could never tick: a
// nil message (ErrNilMessage, as a send of one is) and a negative due time
// or period (ErrInvalidConfig); no timer is started.
func TestStartTimerRefusesBadInput(t *testing.T) {
	type try struct {
		due, period time.Duration
		msg         any
	}
	ticks := make(chan any, 4)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "t", func(grain.ID) grain.Func {
			return func(_ context.Context, c *grain.Context, msg any) (any, error) {
				if m, ok := msg.(try); ok {
					return nil, c.StartTimer("t", m.due, m.period, m.msg)
				}
				ticks <- msg
				return nil, nil
			}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("t", "a")
	for _, c := range []struct {
		try
		want error
	}{
		{try{0, 0, nil}, grain.ErrNilMessage},
		{try{-time.Second, 0, "tick"}, grain.ErrInvalidConfig},
		{try{0, -time.Nanosecond, "tick"}, grain.ErrInvalidConfig},
	} {
		_, err := s.Ask(ctx, id, c.try)
		require.ErrorIs(t, err, c.want, "%+v", c.try)
	}
	_, err := s.Ask(ctx, id, try{0, 0, "tick"}) // a good one, due at once
	require.NoError(t, err)
	assert.Equal(t, "tick", <-ticks, "the first tick is the good timer's")
	_, err = s.Ask(ctx, id, "barrier")
	require.NoError(t, err)
	assert.Equal(t, "barrier", <-ticks)
	assert.Empty(t, ticks, "no other timer was started")
}

// A stopped silo holds no clock timer — a grain's timer an hour off
// included — and nothing in its queues.
func TestAStoppedSiloHoldsNoTimerAndNothingQueued(t *testing.T) {
	for _, how := range []string{"shutdown", "close"} {
		t.Run(how, func(t *testing.T) {
			clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s := newSilo(t, silo.Config{Clock: clk, Partitions: 2}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "ticker", func(grain.ID) *ticker { return &ticker{ticks: make(chan string, 1)} }))
			})
			ctx := ctxT(t)
			for i := range 4 {
				_, err := s.Ask(ctx, grain.NewIntID("ticker", int64(i)), startTimer{"far", time.Hour, 0})
				require.NoError(t, err)
			}
			if how == "close" {
				require.NoError(t, s.Close())
			} else {
				require.NoError(t, s.Shutdown(ctx))
			}
			assert.Zero(t, clk.Pending(), "clock timers left armed")
			st := s.Stats()
			assert.Equal(t, []int{0, 0}, st.QueueDepth)
			assert.Equal(t, []int{0, 0}, st.Backlog)
		})
	}
}

// stubborn's turn waits until released, whatever its ctx says.
type stubborn struct{ release <-chan struct{} }

func (g *stubborn) Receive(context.Context, *grain.Context, any) (any, error) {
	<-g.release
	return nil, nil
}

// A turn that ends after its partition stopped — a Close waits for the
// turns off their partition only as long as Config.DeactivationTimeout —
// queued its end (opTurnDone) for an owner that had gone: the stopped
// silo's queue held it for as long as the silo lived, and Stats counted
// it. What comes for a partition that has stopped goes nowhere now
// (partition.dropLeftovers, queues.Queue.Discard). The several-clients
// model test found it, and the same of a Deactivate that passed the silo's
// state as it stopped, and of a timer wake-up left armed
// (partition.stopWake, armTimers).
func TestATurnThatEndsAfterItsSiloStoppedLeavesNothingQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		s, err := silo.New(silo.Config{Partitions: 1, DeactivationTimeout: time.Millisecond, Logger: newTextLogger(io.Discard)})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "stubborn", func(grain.ID) *stubborn { return &stubborn{release: release} }))
		require.NoError(t, s.Start())
		ctx := context.Background()
		require.NoError(t, s.Tell(ctx, grain.NewID("stubborn", "s"), "wait"))
		synctest.Wait()
		require.NoError(t, s.Close()) // gives up on the turn after a millisecond
		close(release)
		synctest.Wait() // the turn has ended, and queued what it queues
		assert.Equal(t, []int{0}, s.Stats().QueueDepth)
	})
}
