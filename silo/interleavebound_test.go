package silo_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// An ask from a grain's turn goes into a reentrant grain while a turn of it
// waits, past the bound the kind's backlog limit sets on its interleaved
// turns: its caller waits for it, and the grain's waiting turns may wait
// for its caller. Queued behind the bound, the ask closed a deadlock the
// walk across chains does not see — the reentrant grain's turns let
// everything in, as far as it knows — and every ask of it waited for its
// deadline (bench/chaos with -backlog 4 and a reentrant kind: 18–156 asks
// timed out in a run). The bound holds for tells, and for asks from outside
// the silo, which no turn waits for.
func TestATurnsAskPassesAReentrantGrainsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := silo.New(silo.Config{Partitions: 1})
		require.NoError(t, err)
		gate := make(chan struct{})
		// r's turns call b; b's first turn waits for gate, then asks r —
		// on a chain of its own, from outside.
		require.NoError(t, silo.Register(s, "r", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "q" {
					return "ok", nil
				}
				return silo.Call[string](ctx, s, grain.NewID("b", "b"), "work")
			}
		}, silo.WithReentrant(), silo.WithMaxBacklog(1, silo.RejectNewest)))
		registerAsksBack(t, s, gate)
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		bDone := make(chan error, 1)
		go func() {
			_, err := silo.Call[string](ctx, s, grain.NewID("b", "b"), "start")
			bDone <- err
		}()
		synctest.Wait() // b's turn waits for gate
		rDone := make(chan error, 2)
		for range 2 { // two turns of r in flight, its bound: both wait behind b's turn
			go func() {
				_, err := silo.Call[string](ctx, s, grain.NewID("r", "r"), "call-b")
				rDone <- err
			}()
		}
		synctest.Wait()
		start := time.Now()
		close(gate)
		require.NoError(t, <-bDone)
		require.NoError(t, <-rDone)
		require.NoError(t, <-rDone)
		assert.Zero(t, time.Since(start), "an ask waited for its deadline")
	})
}

// An ask from a grain's turn that came while no turn of a reentrant grain
// waited — its one turn running off the partition — waits in its mailbox,
// with what came before it; once a turn waits, it goes in past the bound
// too, not only what the bound has room for. Left behind the bound, it
// waited for the grain's turns, which waited for its caller, until the
// grace of the grain's wait ended (holdgrace.go) and dropped it with the
// rest past its limit: the ask failed as overload, 100 ms on.
func TestATurnsAskInTheMailboxPassesAReentrantGrainsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := silo.New(silo.Config{Partitions: 1})
		require.NoError(t, err)
		gateA, gateB, gateH := make(chan struct{}), make(chan struct{}), make(chan struct{})
		// r's first turn runs off its partition (a blocking kind) until
		// gateA, then calls b, as each of its other turns does.
		require.NoError(t, silo.Register(s, "r", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch msg {
				case "q":
					return "ok", nil
				case "a":
					<-gateA
				}
				return silo.Call[string](ctx, s, grain.NewID("b", "b"), "work")
			}
		}, silo.WithReentrant(), silo.WithBlockingTurns(), silo.WithMaxBacklog(2, silo.RejectNewest)))
		registerAsksBack(t, s, gateB)
		registerHolder(t, s, gateH)
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		done := make(chan error, 7)
		call := asker(ctx, s, done)
		call(grain.NewID("b", "b"), "start") // waits for gateB
		call(grain.NewID("r", "r"), "a")     // runs until gateA, waiting for nothing
		call(grain.NewID("h", "h"), "hold")
		for range 4 {
			call(grain.NewID("r", "r"), "b") // queued
		}
		start := time.Now()
		close(gateB) // b asks r, queued behind them
		synctest.Wait()
		close(gateH) // all of it into r's mailbox, r's turn off the partition
		synctest.Wait()
		close(gateA) // r's turn waits in its call: the mailbox goes in
		for range 7 {
			require.NoError(t, <-done)
		}
		assert.Zero(t, time.Since(start), "an ask waited for its deadline")
	})
}

// registerAsksBack registers on s the kind "b", whose "start" waits for
// gate (in Await) and then asks "r/r" a "q", and which answers anything
// else at once.
func registerAsksBack(t *testing.T, s *silo.Silo, gate <-chan struct{}) {
	t.Helper()
	require.NoError(t, silo.Register(s, "b", func(grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			if msg == "start" {
				if err := silo.Await(ctx, func() error { <-gate; return nil }); err != nil {
					return nil, err
				}
				return silo.Call[string](ctx, s, grain.NewID("r", "r"), "q")
			}
			return "done", nil
		}
	}))
}

// registerHolder registers on s the kind "h", whose turn holds its
// partition until gate closes: what comes meanwhile waits in its queue.
func registerHolder(t *testing.T, s *silo.Silo, gate <-chan struct{}) {
	t.Helper()
	require.NoError(t, silo.Register(s, "h", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) {
			<-gate
			return "held", nil
		}
	}))
}

// asker returns a func that asks a grain a message on a goroutine of its
// own, the error going to done, and waits for the synctest bubble to
// settle.
func asker(ctx context.Context, s *silo.Silo, done chan<- error) func(grain.ID, string) {
	return func(id grain.ID, msg string) {
		go func() {
			_, err := silo.Call[string](ctx, s, id, msg)
			done <- err
		}()
		synctest.Wait()
	}
}

// A turn's ask that goes into a reentrant grain past its bound takes along
// what waits ahead of it in the grain's mailbox: its sender's earlier
// messages among them, which run first, in the order sent. Alone past the
// bound, it overtook them: a grain's two tells and then its ask to a
// reentrant grain at its bound were handled ask first (found by
// TestSeveralClientsAtOnceKeepEveryPromise: "message 2 handled after 4").
func TestATurnsAskPastTheBoundKeepsItsSendersOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := silo.New(silo.Config{Partitions: 1})
		require.NoError(t, err)
		gate := make(chan struct{})
		var got []string // r's turns hold its token in turn: no lock
		require.NoError(t, silo.Register(s, "r", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "wait" {
					return nil, silo.Await(ctx, func() error { <-gate; return nil })
				}
				got = append(got, msg.(string))
				return "ok", nil
			}
		}, silo.WithReentrant(), silo.WithMaxBacklog(2, silo.RejectNewest)))
		r := grain.NewID("r", "r")
		require.NoError(t, silo.Register(s, "c", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, _ any) (any, error) {
				for _, m := range []string{"m1", "m2"} {
					if err := gc.Silo().Tell(ctx, r, m); err != nil {
						return nil, err
					}
				}
				return silo.Call[string](ctx, gc.Silo(), r, "m3")
			}
		}))
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		for range 3 { // r's first turn and two let in: its bound
			require.NoError(t, s.Tell(ctx, r, "wait"))
			synctest.Wait()
		}
		_, err = silo.Call[string](ctx, s, grain.NewID("c", "c"), "go")
		require.NoError(t, err)
		close(gate)
		synctest.Wait()
		require.Equal(t, []string{"m1", "m2", "m3"}, got)
	})
}

// So does one that waited in the mailbox: a turn's tells and then its ask
// to a reentrant grain, queued while its one turn ran off the partition
// waiting for nothing, go in once that turn waits in a call — the first
// with the room the bound leaves, the others past it, the ask with what
// waits ahead of it (partition.letInAhead from flushMailbox), in the order
// sent. Let in alone, the ask ran ahead of the tell left behind the bound.
func TestATurnsAskFromTheMailboxPastTheBoundKeepsItsSendersOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		s, err := silo.New(silo.Config{Partitions: 1, Logger: newTextLogger(&logs)})
		require.NoError(t, err)
		gateA, gateC, gateH := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var got []string // r's turns hold its token in turn: no lock
		r := grain.NewID("r", "r")
		// r's first turn runs off its partition (a blocking kind), holding
		// its token and waiting in no call, until gateA; then it calls b.
		require.NoError(t, silo.Register(s, "r", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "a" {
					<-gateA
					return silo.Call[string](ctx, s, grain.NewID("b", "b"), "work")
				}
				got = append(got, msg.(string))
				return "ok", nil
			}
		}, silo.WithReentrant(), silo.WithBlockingTurns(), silo.WithMaxBacklog(1, silo.RejectNewest)))
		registerAsksBack(t, s, nil) // b answers "work" at once
		// c's turn, off the partition too, tells r m1 and m2 and asks it m3
		// once gateC opens.
		require.NoError(t, silo.Register(s, "c", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, _ any) (any, error) {
				<-gateC
				for _, m := range []string{"m1", "m2"} {
					if err := gc.Silo().Tell(ctx, r, m); err != nil {
						return nil, err
					}
				}
				return silo.Call[string](ctx, gc.Silo(), r, "m3")
			}
		}, silo.WithBlockingTurns()))
		registerHolder(t, s, gateH)
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		done := make(chan error, 3)
		call := asker(ctx, s, done)
		call(r, "a")                      // runs until gateA
		call(grain.NewID("c", "c"), "go") // waits for gateC
		call(grain.NewID("h", "h"), "hold")
		close(gateC) // c's three messages, queued behind h
		synctest.Wait()
		close(gateH) // into r's mailbox: no turn of r waits
		synctest.Wait()
		close(gateA) // r's turn waits in its call: the mailbox goes in
		for range 3 {
			require.NoError(t, <-done)
		}
		synctest.Wait()
		require.Equal(t, []string{"m1", "m2", "m3"}, got)
		// Its backlog filled as m1 went in, its one turn waiting off
		// the partition: held through the wait's grace, the log saying
		// how full (it said 0, the backlog before m1).
		s.WaitLogged()
		require.Contains(t, logs.String(), "grain=r/r backlog=1 limit=1")
	})
}
