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

// A grain whose turns wait off the partition for a moment — each asks
// another grain a question, waits in Await, or is a turn of a kind
// registered WithBlockingTurns — keeps up as a grain whose turns run does:
// sent a flood past its backlog limit, it holds its senders at its door
// through each short wait, and handles every message. The policy applied
// the moment the backlog filled during a wait: a grain that asked a
// question a message, sent 2,000 tells at a limit of 8, refused or dropped
// most of them after their Tell had returned nil (silo's waitGrace).

// waitKinds are the ways a turn waits off its partition that
// TestAGrainWhoseTurnsWaitHoldsItsSenders tries, each a kind of "waiter".
var waitKinds = []struct {
	name string
	opts []silo.KindOption
	wait func(ctx context.Context, s *silo.Silo) error
}{
	{"none", nil, func(context.Context, *silo.Silo) error {
		time.Sleep(50 * time.Microsecond) // on the partition
		return nil
	}},
	{"a call", nil, func(ctx context.Context, s *silo.Silo) error {
		_, err := s.Ask(ctx, grain.NewID("echo", "e"), 1)
		return err
	}},
	{"Await", nil, func(ctx context.Context, _ *silo.Silo) error {
		return silo.Await(ctx, func() error { time.Sleep(50 * time.Microsecond); return nil })
	}},
	{"WithBlockingTurns", []silo.KindOption{silo.WithBlockingTurns()}, func(context.Context, *silo.Silo) error {
		time.Sleep(50 * time.Microsecond) // a store's write, say
		return nil
	}},
}

// offWaiter is a grain whose every turn waits by its wait but a "status"'s.
type offWaiter struct {
	s    *silo.Silo
	wait func(ctx context.Context, s *silo.Silo) error
	done *atomic.Int64
}

func (g *offWaiter) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "status" {
		return "ok", nil // answered at once
	}
	if err := g.wait(ctx, g.s); err != nil {
		return nil, err
	}
	g.done.Add(1)
	return nil, nil
}

// waiterSilo starts a silo of one partition, a queue of 64 and a backlog
// limit of 8 (RejectNewest) for its "waiter" grains, whose turns wait by
// wait; "echo" grains answer at once. It returns the silo and the waiters'
// turns done.
func waiterSilo(t *testing.T, wait func(context.Context, *silo.Silo) error, opts ...silo.KindOption) (*silo.Silo, *atomic.Int64) {
	t.Helper()
	s, err := silo.New(silo.Config{Partitions: 1, QueueCapacity: 64, HandoffThreshold: holdThreshold})
	require.NoError(t, err)
	return s, startWaiters(t, s, wait, opts...)
}

// startWaiters registers waiterSilo's kinds on s and starts it.
func startWaiters(t *testing.T, s *silo.Silo, wait func(context.Context, *silo.Silo) error, opts ...silo.KindOption) *atomic.Int64 {
	t.Helper()
	done := new(atomic.Int64)
	require.NoError(t, silo.Register(s, "waiter", func(grain.ID) *offWaiter {
		return &offWaiter{s: s, wait: wait, done: done}
	}, append(opts, silo.WithMaxBacklog(8, silo.RejectNewest))...))
	require.NoError(t, silo.Register(s, "echo", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) { return msg, nil }
	}))
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Close() })
	return done
}

func TestAGrainWhoseTurnsWaitHoldsItsSenders(t *testing.T) {
	for _, wk := range waitKinds {
		t.Run(wk.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, done := waiterSilo(t, wk.wait, wk.opts...)
				ctx := t.Context()
				const n = 2000
				refused := 0
				most := 0 // the most its backlog held
				for i := range n {
					if err := s.Tell(ctx, grain.NewID("waiter", "w"), i); err != nil {
						require.ErrorIs(t, err, grain.ErrOverloaded)
						refused++
					}
					most = max(most, s.Stats().Backlog[0])
				}
				for done.Load()+int64(refused)+int64(s.Stats().DeadLetters[grain.ReasonOverload]) < n {
					time.Sleep(time.Millisecond)
				}
				require.NoError(t, s.Shutdown(ctx))
				st := s.Stats()
				assert.Zero(t, refused, "tells refused")
				assert.Zero(t, st.DeadLetters[grain.ReasonOverload], "tells dropped")
				assert.Equal(t, int64(n), done.Load())
				assert.NotZero(t, st.BacklogHolds, "its senders were held")
				// Its limit, and what was on its way as the door shut — at
				// most the queue's worth, and one drained just before, as
				// for a grain whose turns run on the partition ("none"):
				// 63–123 here. Its door open at each wait, a queue's worth
				// came in at each, and its backlog passed a thousand.
				assert.LessOrEqual(t, most, 8+2*64, "its backlog passed its limit by more than it had in flight")
			})
		})
	}
}

// A grain whose wait outlasts the grace is taken for blocked, as one whose
// turn the monitor took is: its senders waited at its door from the moment
// its backlog filled, and are refused once the grace is over — not before
// — what came past its limit meanwhile dropped, and the next senders are
// refused at once: a wait has one grace, not one each time its backlog
// fills.
func TestAGrainWaitingPastItsGraceOverflows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		s, done := waiterSilo(t, func(ctx context.Context, _ *silo.Silo) error {
			return silo.Await(ctx, func() error {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			})
		})
		ctx := t.Context()
		id := grain.NewID("waiter", "w")
		start := time.Now() // the backlog fills as the owner takes the first of the queue, at once
		sent := 0
		for ; ; sent++ {
			err := s.Tell(ctx, id, sent) // the first's turn waits until release
			if err != nil {
				require.ErrorIs(t, err, grain.ErrOverloaded)
				break
			}
		}
		grace := silo.GraceFor(holdThreshold)
		assert.GreaterOrEqual(t, time.Since(start), grace, "refused before the grace was over")
		assert.Less(t, time.Since(start), grace+holdThreshold)
		st := s.Stats()
		assert.NotZero(t, st.BacklogWaits, "its sender never waited at its door")
		// The tells past the waiting turn and its backlog's eight dropped
		// as the grace ended, and the refused one.
		assert.Equal(t, uint64(sent-(1+8)+1), st.DeadLetters[grain.ReasonOverload])
		at := time.Now()
		err := s.Tell(ctx, id, -1)
		require.ErrorIs(t, err, grain.ErrOverloaded)
		assert.Zero(t, time.Since(at), "a second grace for the same wait")
		close(release)
		require.NoError(t, s.Shutdown(ctx))
		assert.Equal(t, int64(1+8), done.Load(), "the first and those the backlog held")
	})
}

// A call back on a chain its target waits in is part of the target's turn
// under way: it passes the target's door, held or refusing, and runs
// while the turn waits. Held at the door, it waited there for the grace
// and was refused then; refused, the turn it was part of failed.
func TestACallBackOnTheChainPassesAHeldDoor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var backErr atomic.Pointer[error]
		s, err := silo.New(silo.Config{Partitions: 1, QueueCapacity: 64, HandoffThreshold: holdThreshold})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				<-gate
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				_, err := s.Ask(ctx, grain.NewID("waiter", "w"), "status")
				if err != nil {
					backErr.Store(&err)
				}
				return nil, err
			}
		}))
		done := startWaiters(t, s, func(ctx context.Context, s *silo.Silo) error {
			_, err := s.Ask(silo.AllowCallChainReentrancy(ctx), grain.NewID("relay", "r"), "ping")
			return err
		})
		ctx := t.Context()
		id := grain.NewID("waiter", "w")
		require.NoError(t, s.Tell(ctx, id, 0)) // its turn calls the relay, which waits for gate
		flooded := make(chan int, 1)
		go func() {
			// Its turn waiting, its backlog fills: the sender waits at the
			// door, and stops once it has.
			i := 1
			for ; s.Stats().BacklogWaits == 0; i++ {
				assert.NoError(t, s.Tell(ctx, id, i))
			}
			flooded <- i
		}()
		for s.Stats().BacklogWaits == 0 { // a sender waits at the door, first in line
			time.Sleep(10 * time.Microsecond)
		}
		start := time.Now()
		close(gate)
		sent := <-flooded
		require.NoError(t, s.Shutdown(ctx))
		if p := backErr.Load(); p != nil {
			t.Fatalf("the call back on the chain failed: %v", *p)
		}
		assert.Less(t, time.Since(start), holdThreshold, "the call back waited at the door")
		assert.Equal(t, int64(sent), done.Load(), "%+v", s.Stats())
	})
}
