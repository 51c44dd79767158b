package silo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// busyGrain is a grain whose turns take time on the bubble's clock: a plain
// message its workFor, a stallFor as long as it says.
type busyGrain struct {
	done    *atomic.Int64
	workFor time.Duration
}

type stallFor time.Duration

// blockUntil is a message whose turn lasts until it is closed.
type blockUntil chan struct{}

func (g *busyGrain) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case stallFor:
		select { // a Close ends it
		case <-ctx.Done():
		case <-time.After(time.Duration(m)):
		}
	case blockUntil:
		select {
		case <-ctx.Done():
		case <-m:
		}
	default:
		time.Sleep(g.workFor) // the turn's work, on the bubble's clock
	}
	g.done.Add(1)
	return nil, nil
}

// busySilo starts a silo of cfg whose "busy" grains take workFor a turn,
// registered with opts, and closes it at the end of the test; it returns
// the silo and the turns done.
func busySilo(t *testing.T, cfg silo.Config, workFor time.Duration, opts ...silo.KindOption) (*silo.Silo, *atomic.Int64) {
	t.Helper()
	s, err := silo.New(cfg)
	require.NoError(t, err)
	done := new(atomic.Int64)
	require.NoError(t, silo.Register(s, "busy", func(grain.ID) *busyGrain {
		return &busyGrain{done: done, workFor: workFor}
	}, opts...))
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Close() }) // closed already, mostly
	return s, done
}

// holdThreshold is the handoff threshold of rejectingSilo.
const holdThreshold = 5 * time.Millisecond

// rejectingSilo is a busySilo of one partition whose "busy" grains take
// workFor a turn and refuse the newest past a backlog of 8.
func rejectingSilo(t *testing.T, workFor time.Duration) (*silo.Silo, *atomic.Int64) {
	t.Helper()
	return busySilo(t, silo.Config{Partitions: 1, QueueCapacity: 64, HandoffThreshold: holdThreshold}, workFor,
		silo.WithMaxBacklog(8, silo.RejectNewest))
}

// quickTurn is a turn quick enough that a grain sent one message after
// another runs them as they come, holding its partition while its sender
// waits for room in the full queue: a grain of slower turns (stepOffMin,
// 50 µs) steps from its mailbox after a few in a row, its sender held at
// its door, and one of quicker turns after a streak of streakSlice, 1 ms
// (slice.go) — which rejectingSilo's queue of 64 never holds.
const quickTurn = 20 * time.Microsecond

// A grain sent messages faster than it handles them holds its partition's
// queue at its backlog limit (or fills it, its turns running as they
// come), and its sender waits for room. When the handoff monitor takes one
// of its turns — a turn that ran through two of its looks, as one whose
// goroutine waits for a core does — the grain keeps its sender waiting for
// a grace: a turn back within it leaves the grain served, as if the
// handoff had not been, and its sender is refused nothing (RejectNewest
// refused the rest of the loop once the turn was off: 910 tells of 2,000).
// A turn that outlasts the grace overflows by the policy
// (TestAGrainBlockedPastTheGraceOverflows).
func TestAGrainPreemptedOffItsPartitionRefusesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Through two looks, back within the grace after them.
		refused, handled, st := stallAmidTells(t, 5*holdThreshold/2)
		require.NotZero(t, st.BacklogHolds, "the grain held its senders")
		require.NotZero(t, st.Handoffs, "the monitor took the stalled turn")
		assert.Zero(t, refused, "tells refused")
		assert.Equal(t, int64(stallTells-refused), handled)
		assert.Zero(t, st.DeadLetters[grain.ReasonOverload])
	})
}

// stallTells is how many tells stallAmidTells sends.
const stallTells = 2000

// stallAmidTells sends a rejectingSilo's grain of 100 µs turns stallTells
// tells in a loop, the middle one a turn that stalls for stall, and shuts
// the silo down: it returns the tells refused, the turns handled and the
// silo's Stats.
func stallAmidTells(t *testing.T, stall time.Duration) (refused int, handled int64, st silo.Stats) {
	s, done := rejectingSilo(t, 100*time.Microsecond)
	ctx := t.Context()
	id := grain.NewID("busy", "a")
	for i := range stallTells {
		var m any = i
		if i == stallTells/2 {
			m = stallFor(stall)
		}
		if err := s.Tell(ctx, id, m); err != nil {
			require.ErrorIs(t, err, grain.ErrOverloaded)
			refused++
		}
	}
	require.NoError(t, s.Shutdown(ctx))
	return refused, done.Load(), s.Stats()
}

// A turn held off its core by the host for many thresholds — a shared VM
// held turns that do next to nothing 7–44 ms (the bench's slow-turn lines)
// — is no blocked grain either: a grace is 100 ms at least, whatever the
// threshold (silo.GraceFor). With a grace of two thresholds, the zipf
// workload's hottest grain, held 12 ms, lost 581 tells as overload dead
// letters; here a stall of eight thresholds lost 984–988 tells of 2,000
// (925 refused, the rest dead letters).
func TestAGrainHeldOffItsCoreManyThresholdsRefusesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused, handled, st := stallAmidTells(t, 8*holdThreshold)
		require.NotZero(t, st.Handoffs, "the monitor took the stalled turn")
		assert.Zero(t, refused, "tells refused")
		assert.Equal(t, int64(stallTells), handled)
		assert.Zero(t, st.DeadLetters[grain.ReasonOverload])
	})
}

// A grain working down a backlog — a turn of it stepped with messages
// behind it, its backlog not full and nobody waiting — whose turn the
// monitor takes has the grace too: the backlog it fills meanwhile holds
// its sender at its door, and the turn, back within the grace, finds the
// grain served. Without the grace, RejectNewest refused the sender the
// moment the backlog filled behind the turn off the partition, though the
// grain had been keeping at it.
func TestAGrainBehindWithRoomKeepsItsSenderThroughAGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, done := rejectingSilo(t, 100*time.Microsecond)
		ctx := t.Context()
		id := grain.NewID("busy", "a")
		// A turn that blocks, ran as it came: taken, and no grace (nobody
		// waited); meanwhile a stall and three more wait in the backlog.
		release := make(blockUntil)
		require.NoError(t, s.Tell(ctx, id, release))
		for s.Stats().Handoffs == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		require.NoError(t, s.Tell(ctx, id, stallFor(5*holdThreshold/2))) // through two looks, back within the grace
		for range 3 {
			require.NoError(t, s.Tell(ctx, id, 0))
		}
		for s.Stats().Backlog[0] < 4 {
			time.Sleep(100 * time.Microsecond)
		}
		close(release) // the stall is the next step, with three behind it
		for s.Stats().Handoffs == 1 {
			time.Sleep(100 * time.Microsecond)
		}
		refused := 0
		const sends = 100 // one each 200 µs, through the grace and after: twice as fast as the grain's turns
		for i := range sends {
			if err := s.Tell(ctx, id, i); err != nil {
				require.ErrorIs(t, err, grain.ErrOverloaded)
				refused++
			}
			time.Sleep(200 * time.Microsecond)
		}
		assert.Zero(t, refused, "refused while the grain's turn was off for a grace")
		assert.NotZero(t, s.Stats().BacklogWaits, "the sender never waited at the door: nothing was tested")
		_, err := s.Ask(ctx, id, 0)
		require.NoError(t, err)
		assert.EqualValues(t, 1+1+3+sends+1, done.Load(), "every message handled")
		require.NoError(t, s.Close())
	})
}

// A grain whose sender was held back (the queue full), and whose turn then
// blocks past the grace, overflows by its policy once the grace is over,
// 100 ms after the monitor took the turn (two thresholds, for a threshold
// over 50 ms): RejectNewest refuses its sender then. Meanwhile the partition's other grains are served.
func TestAGrainBlockedPastTheGraceOverflows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := rejectingSilo(t, quickTurn)
		ctx := t.Context()
		refusedAt := make(chan time.Time, 1)
		go func() {
			for i := 0; ; i++ {
				var m any = i
				if i == 1000 {
					m = stallFor(time.Hour) // blocks, as far as anyone can tell
				}
				if err := s.Tell(ctx, grain.NewID("busy", "a"), m); err != nil {
					assert.ErrorIs(t, err, grain.ErrOverloaded)
					refusedAt <- time.Now()
					return
				}
			}
		}()
		for s.Stats().Handoffs == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		handoff := time.Now()
		start := time.Now()
		_, err := s.Ask(ctx, grain.NewID("busy", "b"), 0)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), holdThreshold, "another grain waited for the grace")
		at := <-refusedAt
		grace := silo.GraceFor(holdThreshold)
		assert.GreaterOrEqual(t, at.Sub(handoff), grace-time.Millisecond, "refused before the grace was over")
		assert.Less(t, at.Sub(handoff), grace+holdThreshold)
		require.NoError(t, s.Close())
	})
}

// With DropOldest, the grain blocked past its grace drops what its backlog
// holds past its limit, oldest first — what it was sent during the grace
// counting — once the grace is over, not before.
func TestAGrainBlockedPastTheGraceDropsItsOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 8
		s, _ := busySilo(t, silo.Config{Partitions: 1, QueueCapacity: 64, HandoffThreshold: holdThreshold}, 100*time.Microsecond,
			silo.WithMaxBacklog(limit, silo.DropOldest))
		dl := s.SubscribeDeadLetters(4096)
		defer dl.Cancel()
		ctx, stop := context.WithCancel(t.Context())
		sent := make(chan int, 1)
		go func() {
			i := 0
			for ; ctx.Err() == nil; i++ {
				var m any = i
				if i == 1000 {
					m = stallFor(time.Hour)
				}
				if err := s.Tell(ctx, grain.NewID("busy", "a"), m); err != nil {
					assert.ErrorIs(t, err, context.Canceled, "DropOldest refuses nothing")
					break
				}
			}
			sent <- i
		}()
		for s.Stats().Handoffs == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		handoff := time.Now()
		first := <-dl.C
		require.Equal(t, grain.ReasonOverload, first.Reason)
		assert.GreaterOrEqual(t, time.Since(handoff), silo.GraceFor(holdThreshold)-time.Millisecond, "dropped before the grace was over")
		stop()
		n := <-sent
		require.NoError(t, s.Close())
		last := first.Msg.(int)
		assert.Equal(t, 1001, last, "the oldest waiting, behind the blocked turn's")
		for d := range dl.C {
			if d.Reason != grain.ReasonOverload {
				continue // the rest, at the Close
			}
			i := d.Msg.(int)
			if i == n {
				continue // the send that waited at the door as stop came: refused
			}
			assert.Greater(t, i, last, "dropped oldest first")
			last = i
		}
		assert.Less(t, last, n)
	})
}

// The senders waiting at a grain's door through a grace that ends with its
// turn still off are refused (RejectNewest): their messages are new, and
// the grain is taken for blocked. Let in for having waited, they went in
// past its limit, one each.
func TestSendersWaitingThroughAGraceAreRefusedWhenItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := rejectingSilo(t, quickTurn)
		type send struct {
			waited bool
			end    time.Time
			err    error
		}
		var next atomic.Int64
		results := make(chan []send, 4)
		for range 4 {
			go func() {
				var mine []send
				for {
					var m any = 0
					if next.Add(1) == 1000 {
						m = stallFor(time.Hour)
					}
					start := time.Now()
					err := s.Tell(t.Context(), grain.NewID("busy", "a"), m)
					mine = append(mine, send{time.Since(start) > 0, time.Now(), err})
					if err != nil {
						results <- mine
						return
					}
				}
			}()
		}
		var all []send
		for range 4 {
			all = append(all, <-results...)
		}
		var refusedAt time.Time
		for _, x := range all {
			if x.err != nil {
				require.ErrorIs(t, x.err, grain.ErrOverloaded)
				if refusedAt.IsZero() || x.end.Before(refusedAt) {
					refusedAt = x.end
				}
			}
		}
		waitedThrough := 0
		for _, x := range all {
			if x.waited && !x.end.Before(refusedAt) {
				waitedThrough++
				assert.Error(t, x.err, "let in as the grace ended, the grain taken for blocked")
			}
		}
		assert.NotZero(t, waitedThrough, "no sender waited through the grace")
		require.NoError(t, s.Close())
	})
}

// A grain that kept up with what it was sent — nobody waiting for it,
// nothing of it behind its turn, the partition's next message another
// grain's — is no more blocked when the host holds its turn off its core
// than one that was behind: it has the grace too, and its sender waits at
// its door through the stall rather than being refused.
func TestAGrainThatKeptUpHeldOffItsCoreRefusesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, done := rejectingSilo(t, 100*time.Microsecond)
		ctx := t.Context()
		hot, other := grain.NewID("busy", "hot"), grain.NewID("busy", "other")
		const n = 400
		refused := 0
		for i := range n {
			var m any = i
			if i == n/2 {
				m = stallFor(8 * holdThreshold)
			}
			if err := s.Tell(ctx, hot, m); err != nil {
				require.ErrorIs(t, err, grain.ErrOverloaded)
				refused++
			}
			require.NoError(t, s.Tell(ctx, other, i)) // the partition's next message is not the hot grain's
			time.Sleep(300 * time.Microsecond)        // slower than the grain: it keeps up
		}
		require.NoError(t, s.Shutdown(ctx))
		st := s.Stats()
		require.NotZero(t, st.Handoffs, "the monitor took the stalled turn")
		assert.Zero(t, refused, "tells refused")
		assert.Zero(t, st.DeadLetters[grain.ReasonOverload])
		assert.Equal(t, int64(2*n), done.Load())
	})
}
