package silo_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// flooded does a slow turn for each message and counts them where a test
// and other grains can read the count.
type flooded struct {
	done *atomic.Int64
	work time.Duration
}

func (f flooded) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if _, ok := msg.(string); ok {
		return f.done.Load(), nil
	}
	busyWork(f.work)
	f.done.Add(1)
	return nil, nil
}

// startFlood starts a silo of one partition and sends n tells to the
// flooded grain "hot", each turn work long; done counts the turns run.
func startFlood(t *testing.T, n int, work time.Duration) (*silo.Silo, context.Context, *atomic.Int64) {
	t.Helper()
	done := new(atomic.Int64)
	s := newSilo(t, silo.Config{Partitions: 1, QueueCapacity: 1 << 14}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flooded", func(grain.ID) flooded { return flooded{done, work} }))
	})
	ctx := ctxT(t)
	for range n {
		require.NoError(t, s.Tell(ctx, grain.NewID("flooded", "hot"), struct{}{}))
	}
	return s, ctx, done
}

// soloFloodTurns is the flood startSoloFlood sends.
const soloFloodTurns = 5_000

// startSoloFlood is startFlood on one core (GOMAXPROCS=1, as Go sets it in
// a container limited to one CPU, until the test ends), of soloFloodTurns
// turns of work.
func startSoloFlood(t *testing.T, work time.Duration) (*silo.Silo, context.Context, *atomic.Int64) {
	t.Helper()
	prev := runtime.GOMAXPROCS(1) // before Start, which reads it
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	return startFlood(t, soloFloodTurns, work)
}

// duringFlood measures n times while a flood of flood turns (done counts
// them) runs, and returns the measures sorted; the flood must outlast them.
func duringFlood(t *testing.T, done *atomic.Int64, flood, n int, measure func() int64) []int64 {
	t.Helper()
	out := make([]int64, 0, n)
	for range n {
		out = append(out, measure())
	}
	require.Less(t, done.Load(), int64(flood), "the flood ended before the measures did: nothing measured")
	slices.Sort(out)
	return out
}

// A flood of messages to one grain holds its partition's other grains for
// a time slice, not for the whole flood. The partition's owner ran every
// message for an idle grain as it came to it, so the flood's thousands of
// turns ran one after the other while an ask to another grain of the
// partition, sent just behind them, waited for all of them (Orleans runs
// an activation's messages for a quantum, then the next activation's).
func TestAFloodToOneGrainHoldsItsPartitionASliceNotTheWholeFlood(t *testing.T) {
	const (
		flood = 2_000
		work  = 200 * time.Microsecond // the flood: 0.4 s of turns
	)
	s, ctx, _ := startFlood(t, flood, work)
	askBehindFlood(ctx, t, s, flood, flood/2)
}

// askBehindFlood asks the grain "other" of a flooded silo how many of the
// flood's turns ran before its own, and requires fewer than most; then
// that the flood's grain "hot" handled all of it, behind the other's
// turn, and nothing became a dead letter.
func askBehindFlood(ctx context.Context, t *testing.T, s *silo.Silo, flood, most int) {
	t.Helper()
	hot, other := grain.NewID("flooded", "hot"), grain.NewID("flooded", "other")
	ahead, err := silo.Call[int64](ctx, s, other, "how many ran before me")
	require.NoError(t, err)
	t.Logf("%d of the flood's %d turns ran before the other grain's", ahead, flood)
	require.Less(t, ahead, int64(most), "the other grain waited for the flood")
	n, err := silo.Call[int64](ctx, s, hot, "all of it")
	require.NoError(t, err)
	require.EqualValues(t, flood, n)
	require.Empty(t, s.Stats().DeadLetters)
}

// On one core the program's other goroutines get the core back soon while
// a partition works down a flood of slow turns: the owner yields every
// soloFlood then, not every soloMax (solo.go). A goroutine waiting on a
// 1 ms timer beside the flood got the core back when the owner gave it up:
// 5 ms at the median, about 25 of the flood's turns.
func TestOnOneCoreAFloodOfSlowTurnsHoldsTheCoreBriefly(t *testing.T) {
	const timers = 11
	_, _, done := startSoloFlood(t, 200*time.Microsecond)
	for done.Load() < 20 {
		// The flood steps: past its first few turns, which ran as they
		// came, and the rest of it going into its mailbox — under the
		// race detector 5–10 ms, in which no turn runs to count.
		runtime.Gosched()
	}
	ran := duringFlood(t, done, soloFloodTurns, timers, func() int64 { // the flood's turns during a timer's wait
		at := done.Load()
		<-time.After(time.Millisecond) // a timer of the program's: five of the flood's turns, if the core came back at once
		return done.Load() - at
	})
	t.Logf("the flood's turns during a 1 ms timer: %v", ran)
	require.LessOrEqual(t, ran[timers/2], int64(12), "the timer's goroutine waited for the owner's hold of the core")
}

// A flood lets its partition's other messages by after a few of its turns
// when they are slow, after about a millisecond of them when they are
// quicker — not after a slice of the monitor's looks: a grain sent one
// message after another steps from its mailbox once a few in a row took
// stepOffMin each, or a streak of them streakSlice (slice.go). With the
// looks a second apart, the other grain's ask, sent just behind the flood,
// waited for all of it; on the default threshold the first ask to a
// neighbour as a flood began waited 8–16 ms on two cores.
func TestAFloodStepsAfterAStreakOfItsTurns(t *testing.T) {
	for _, tc := range []struct {
		name string
		work time.Duration
	}{
		{"slow turns", 200 * time.Microsecond}, // 0.4 s of turns
		{"quick turns", 20 * time.Microsecond}, // 40 ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			const flood = 2_000
			done := new(atomic.Int64)
			s := newSilo(t, silo.Config{Partitions: 1, QueueCapacity: 1 << 14, HandoffThreshold: time.Second}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "flooded", func(grain.ID) flooded { return flooded{done, tc.work} }))
			})
			ctx := ctxT(t)
			for range flood {
				require.NoError(t, s.Tell(ctx, grain.NewID("flooded", "hot"), struct{}{}))
			}
			askBehindFlood(ctx, t, s, flood, flood/4)
		})
	}
}

// On one core (GOMAXPROCS=1, as Go sets it in a container limited to one
// CPU) the callers a flooded partition answers get the core back soon
// after their answer, not when the scheduler next preempts the partition's
// owner: each ask to a neighbour of the flooded grain was answered within
// a slice, but its caller ran again 20 ms later, a hundred of the flood's
// turns further on (solo.go); then, until the owner yielded before the
// flood's next steps, two turns later (0.4 ms: answeredYield) — and for a
// flood of quicker turns, until a streak of them made the grain the
// partition's flooder, ten (the share's 200 µs).
func TestOnOneCoreTheCallersOfAFloodedPartitionRunSoon(t *testing.T) {
	for _, tc := range []struct {
		name string
		work time.Duration
	}{
		{"slow turns", 200 * time.Microsecond}, // a second of them
		{"quick turns", 20 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Most callers run before the flood's next turn: the owner
			// yields once its round answered them, before a flood steps
			// (answeredYield). Without that they ran after the flood's
			// share of steps, and without solo.go's yields, 20 ms later.
			callersRunSoon(t, func(t *testing.T) (*silo.Silo, context.Context, *atomic.Int64) {
				return startSoloFlood(t, tc.work)
			}, soloFloodTurns, 1)
		})
	}
}

// With a second core, the callers a flood of quick turns' partition
// answers run before the flood's next steps too, while the scheduler has a
// core for them: answered as the round begins, each was readied on the
// owner's core, and waited there for the flood's share of steps (200 µs,
// ten turns of 20 µs) — the idle core takes a goroutine readied on a busy
// one only after a pause of the scheduler's own (its runnext), longer than
// that. So the owner yields to them first, as on one core (answeredYield).
// A quick flood is never stepped off: a handoff would cost more than its
// steps.
func TestTheCallersOfAQuicklyFloodedPartitionRunSoon(t *testing.T) {
	prev := runtime.GOMAXPROCS(2) // before Start, which reads it
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	const flood = 5_000
	// Without the yield a caller here often runs on the idle core after
	// a turn or two of the flood's, not after ten: none, then.
	callersRunSoon(t, func(t *testing.T) (*silo.Silo, context.Context, *atomic.Int64) {
		return startFlood(t, flood, 20*time.Microsecond)
	}, flood, 0)
}

// callersRunSoon floods a fresh silo (start: a flood of flood turns, done
// counting them), asks a neighbour of the flooded grain while the flood
// runs, and checks that three callers in four returned before the flood's
// next turn after their answer, or the one after it (most: the flood's turns
// between an answer and its caller's return, at the third quartile).
//
// One trial is only as good as the machine's moment: the whole package under
// -race -cpu 1,2,4 failed it once in nine runs, its callers waiting for five
// of the flood's turns at the median, as if the owner had not yielded — a
// yield that seems to wait out a CPU-bound goroutine (another process taking
// a core for 20 ms will do) turns the silo's yields off for about a second
// (yield.go), and a crowded scheduler turns off the owner's yield to its
// callers. So it floods two or three fresh silos, and requires the callers
// to have run soon in two of them. A trial in which the silo saw a hog and
// turned its yields off measured the machine, not the yields, and is not
// counted (CI's race step once failed two of three so, at 3 and 4 turns);
// eight trials at most. Without the owner's yield to its answered
// callers the trials fail (checked: on one core every caller waits 2 or 10
// turns, with turns of 200 and 20 µs; on two, mostly 1-10).
func callersRunSoon(t *testing.T, start func(*testing.T) (*silo.Silo, context.Context, *atomic.Int64), flood int, most int64) {
	t.Helper()
	const asks = 21
	other := grain.NewID("flooded", "other")
	var q3s []int64
	for passed, trials := 0, 0; passed < 2 && len(q3s)-passed < 2 && trials < 8; trials++ {
		s, ctx, done := start(t)
		later := duringFlood(t, done, flood, asks, func() int64 { // the flood's turns between an answer and its caller's return
			at, err := silo.Call[int64](ctx, s, other, "how many ran")
			require.NoError(t, err)
			return done.Load() - at
		})
		hogged, crowded := s.YieldsOff()
		s.Close() // its flood would hold up the next trial's
		t.Logf("trial %d: the flood's turns between an answer and its caller's return: %v (yields off for a hog: %v; the scheduler crowded: %v)",
			trials+1, later, hogged, crowded)
		if hogged {
			continue // the machine's moment, not the yields: not counted
		}
		q3 := later[asks*3/4]
		q3s = append(q3s, q3)
		if q3 <= most {
			passed++
		}
	}
	require.NotEmpty(t, q3s, "every trial found a hog and turned the yields off: nothing measured")
	slices.Sort(q3s)
	require.LessOrEqual(t, q3s[len(q3s)/2], most, "the callers waited for the flood's steps (each trial's third quartile: %v)", q3s)
}

// A flood past the backlog limit of a grain whose turns run — slower than
// it is sent messages, but running — loses nothing: its senders wait for
// room, at its door, as they did in the partition's queue when its turns
// held the partition, under either overflow policy. Sliced, the flood's messages
// wait in the grain's backlog; refused there, or the oldest dropped, a
// loop of 300,000 tells to a counter lost its 10,000th and on under the
// race detector. Meanwhile the partition's other grains are served.
//
// A turn handed off — on a loaded machine a goroutine may wait for a core
// past a look of the handoff monitor — is a grain whose turns do not run,
// for as long: what comes for it meanwhile counts toward its limit, as
// ever. Then some may be refused or dropped, each accounted for; with no
// handoff, none.
func TestAFloodPastTheBacklogLimitOfAServedGrainWaitsForRoom(t *testing.T) {
	for _, policy := range []silo.Overflow{silo.RejectNewest, silo.DropOldest} {
		t.Run(policyName(policy), func(t *testing.T) {
			const (
				flood = 3_000
				limit = 50
				work  = 50 * time.Microsecond
			)
			var done atomic.Int64
			s := newSilo(t, silo.Config{Partitions: 1, QueueCapacity: 1024}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "flooded", func(grain.ID) flooded { return flooded{&done, work} },
					silo.WithMaxBacklog(limit, policy)))
			})
			ctx := ctxT(t)
			hot := grain.NewID("flooded", "hot")
			other := make(chan int64, 1)
			go func() {
				// asked while the flood goes on: the partition serves it
				n, err := silo.Call[int64](ctx, s, grain.NewID("flooded", "other"), "")
				if err != nil {
					n = -1
				}
				other <- n
			}()
			refused := tellFlood(t, ctx, s, hot, flood)
			n, asksRefused, err := askHowMany(ctx, s, hot)
			require.NoError(t, err)
			require.GreaterOrEqual(t, <-other, int64(0))
			st := s.Stats()
			// a refused send is a dead letter too
			dropped := int(st.DeadLetters[grain.ReasonOverload]) - refused - asksRefused
			require.Equal(t, flood, int(n)+refused+dropped, "handled, refused or dropped: every tell")
			require.NotZero(t, st.QueueWaits+st.BacklogWaits, "the senders waited for room")
			// A step-off (stepoff.go) leaves the flood's grain served: only
			// another handoff may refuse or drop.
			if st.Handoffs > st.StepOffs {
				t.Logf("%d handoffs (%d step-offs): %d refused, %d dropped", st.Handoffs, st.StepOffs, refused, dropped)
				return
			}
			require.Zero(t, refused)
			require.Zero(t, dropped)
			require.NotZero(t, st.BacklogHolds, "its full backlog held its senders")
		})
	}
}

// tellFlood tells hot n messages, each a turn of its flood, and returns
// how many were refused with ErrOverloaded (anything else fails t).
func tellFlood(t *testing.T, ctx context.Context, s *silo.Silo, hot grain.ID, n int) (refused int) {
	t.Helper()
	for range n {
		if err := s.Tell(ctx, hot, struct{}{}); err != nil {
			require.ErrorIs(t, err, silo.ErrOverloaded)
			refused++
		}
	}
	return refused
}

// askHowMany asks the flooded grain hot how many of its turns ran, again
// while the ask is refused with ErrOverloaded (a turn of it off the
// partition), and returns the count and the refusals.
func askHowMany(ctx context.Context, s *silo.Silo, hot grain.ID) (n int64, refused int, err error) {
	n, err = silo.Call[int64](ctx, s, hot, "all of it")
	for errors.Is(err, silo.ErrOverloaded) {
		refused++
		n, err = silo.Call[int64](ctx, s, hot, "all of it")
	}
	return n, refused, err
}

func policyName(o silo.Overflow) string {
	if o == silo.DropOldest {
		return "DropOldest"
	}
	return "RejectNewest"
}

// A grain refused for a full backlog while its turn was blocked takes
// messages again as soon as its turns run, though its backlog is still
// full: its senders then wait for room, as for any grain served (hold),
// and the hold is counted and logged.
// Refused until its backlog went below the limit, a loop of tells to a
// counter whose turn had been handed off for want of a core lost half its
// messages on a loaded machine.
func TestAGrainServedAgainTakesMessagesThoughItsBacklogIsFull(t *testing.T) {
	const limit = 5
	var logs syncBuffer
	s := newSilo(t, silo.Config{Partitions: 1, Logger: newTextLogger(&logs)}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "printer", func(grain.ID) *printer { return &printer{} },
			silo.WithMaxBacklog(limit, silo.RejectNewest)))
	})
	ctx := ctxT(t)
	id := grain.NewID("printer", "p")
	started1, release1 := make(chan struct{}), make(chan struct{})
	started2, release2 := make(chan struct{}), make(chan struct{})
	var closed1, closed2 bool
	t.Cleanup(func() { // before the silo closes, should the test fail
		if !closed1 {
			close(release1)
		}
		if !closed2 {
			close(release2)
		}
	})
	require.NoError(t, s.Tell(ctx, id, holdUntil{started1, release1}))
	<-started1
	// Queued behind the held turn before it is handed off: the backlog
	// full, to its limit.
	require.NoError(t, s.Tell(ctx, id, holdUntil{started2, release2}))
	const more = limit - 1
	for range more {
		require.NoError(t, s.Tell(ctx, id, printDoc{}))
	}
	waitBacklog(t, s, more+1) // handed off, its backlog delivered
	require.ErrorIs(t, s.Tell(ctx, id, printDoc{}), silo.ErrOverloaded, "full while its turn is blocked")

	close(release1)
	closed1 = true
	<-started2 // its turns run again; its backlog is full still
	require.NoError(t, s.Tell(ctx, id, printDoc{}), "served again: taken")
	close(release2)
	closed2 = true
	jobs, err := silo.Call[int](ctx, s, id, printDoc{})
	require.NoError(t, err)
	require.Equal(t, more+2, jobs)
	// Served with its backlog full, it held its senders: counted
	// and logged, naming it.
	require.NotZero(t, s.Stats().BacklogHolds)
	s.WaitLogged()
	require.Contains(t, logs.String(), `msg="granary: a grain's backlog is full while its turns run`)
	require.Contains(t, logs.String(), "grain=printer/p")
}

// A hot key of a busy partition — an eighth of its messages to one grain,
// each turn cheap, the rest spread over a thousand grains — keeps pace.
// Once a round has run long enough to defer the hot grain's messages to
// its mailbox, its steps had 200 µs for every few milliseconds of the
// other grains' deliveries: it fell further behind each round until its
// backlog was full and held its senders (every sender waiting, a warning
// logged), dozens of times a run of the bench's `zipf`. Its steps now run
// as long as the deliveries did, and it catches up.
func TestAHotKeyOfABusyPartitionKeepsPace(t *testing.T) {
	const (
		senders = 2
		each    = 100_000
		keys    = 1_000
	)
	s := newSilo(t, silo.Config{Partitions: 1}, nil)
	ctx := ctxT(t)
	hot := grain.NewID("counter", "hot")
	cpu0, cpuOK := silo.ProcessCPU()
	began := time.Now()
	errs := make(chan error, senders)
	for range senders {
		go func() {
			for i := range each {
				id := hot
				if i%8 != 0 {
					id = grain.NewIntID("counter", int64(i%keys))
				}
				if err := s.Tell(ctx, id, incr{1}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range senders {
		require.NoError(t, <-errs)
	}
	n, err := silo.Call[int](ctx, s, hot, get{})
	require.NoError(t, err)
	require.Equal(t, senders*each/8, n, "the hot grain counted every message")
	st := s.Stats()
	// How much of the cores its three busy goroutines (the senders, the
	// owner) could use the process had: under -race on two cores, 0.66–0.74
	// alone, 0.24–0.30 beside four busy loops.
	cpu1, _ := silo.ProcessCPU()
	had := float64(cpu1-cpu0) / float64(time.Since(began)) / float64(min(runtime.GOMAXPROCS(0), senders+1))
	if !cpuOK || had < 0.5 {
		// Kept off its cores (a CI run of every package under -race on two
		// cores, beside busy loops), the hot grain falls behind for want
		// of a core now and then: a hold in one run of four or five, with
		// the process standing still (Stats.Stalls) or not. Falling behind
		// for want of the rule cannot be told from that here; the rule is
		// checked without time in
		// TestALongRoundDefersOnlyTheGrainsTheLooksFellIn.
		t.Logf("the process had %.2f of its cores: %d holds not counted against the grain", had, st.BacklogHolds)
	} else {
		// With its cores, a hold is falling behind: the faulty code that
		// deferred every grain that ran in a long round held once a run.
		require.Zero(t, st.BacklogHolds, "the hot grain fell behind until its backlog held its senders (the process had %.2f of its cores)", had)
	}
	require.Empty(t, st.DeadLetters, "%v", st.DeadLetters)
}
