package silo_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// stepper's turns are a flood's: each spins for its work, but for the
// first, which waits in an await point until released (the grain busy
// meanwhile, so that what it is sent waits in its backlog and runs as the
// partition's steps), and a gate, which says it has begun and waits.
type stepper struct{}

type (
	stepAwait struct{ release chan struct{} }
	stepWork  struct{ work time.Duration }
	stepGate  struct{ begun, release chan struct{} }
	// a gate that a test's end opens too
	stepGateOr struct {
		stepGate
		or chan struct{}
	}
	// a step that says it has begun and waits for open (or for the
	// test's end: or)
	stepBlock struct{ begun, open, or chan struct{} }
	// a step of work that counts itself in n once done
	stepCount struct {
		work time.Duration
		n    *atomic.Int64
	}
	// a neighbour's turn that says how many stepCounts had run by then
	stepSeen struct {
		n    *atomic.Int64
		seen chan int64
	}
)

func (stepper) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case stepAwait:
		return nil, silo.Await(ctx, func() error { <-m.release; return nil })
	case stepWork:
		busyWork(m.work)
	case stepGate:
		close(m.begun)
		<-m.release
	case stepBlock:
		m.begun <- struct{}{}
		select {
		case <-m.open:
		case <-m.or:
		}
	case stepGateOr:
		close(m.begun)
		select {
		case <-m.release:
		case <-m.or:
		}
	case stepCount:
		busyWork(m.work)
		m.n.Add(1)
	case stepSeen:
		m.seen <- m.n.Load()
	}
	return "served", nil
}

// stepperSilo is a silo of one partition, on two cores or more, whose
// handoff monitor never takes a turn (its threshold an hour): only a
// sender steps the partition off a flood's turn.
func stepperSilo(t *testing.T) *silo.Silo {
	t.Helper()
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a step-off needs a second core (on one, the new owner would wait for the step's)")
	}
	return newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "stepper", func(grain.ID) stepper { return stepper{} }))
	})
}

// floodsGoOn checks that the floods of the stepper grains hot go on to
// their end, every turn of them run: an ask behind each is answered, and
// nothing became a dead letter.
func floodsGoOn(ctx context.Context, t *testing.T, s *silo.Silo, hot ...grain.ID) {
	t.Helper()
	for _, h := range hot {
		_, err := silo.Call[string](ctx, s, h, stepWork{})
		require.NoError(t, err)
	}
	require.Empty(t, s.Stats().DeadLetters)
}

// floodBeside is a stepperSilo with its flood's grain, hot, and a
// neighbour, other, active before the flood.
func floodBeside(t *testing.T) (*silo.Silo, context.Context, grain.ID, grain.ID) {
	t.Helper()
	s := stepperSilo(t)
	ctx := ctxT(t)
	hot, other := grain.NewID("stepper", "hot"), grain.NewID("stepper", "other")
	_, err := silo.Call[string](ctx, s, other, stepWork{})
	require.NoError(t, err)
	return s, ctx, hot, other
}

// gatedFlood floods the stepper grain hot of s: its first message awaits,
// so that the rest wait in its backlog, then before slow steps of 100 µs,
// a gate and after steps of afterWork each. It lets the flood go and
// returns once the gate's step has begun. The gate opens at the test's
// end, whatever happens.
func gatedFlood(ctx context.Context, t *testing.T, s *silo.Silo, hot grain.ID, before, after int, afterWork time.Duration) stepGate {
	t.Helper()
	awaited, released := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(released) })
	require.NoError(t, s.Tell(ctx, hot, stepAwait{awaited}))
	for range before {
		require.NoError(t, s.Tell(ctx, hot, stepWork{100 * time.Microsecond}))
	}
	gate := stepGate{make(chan struct{}), make(chan struct{})}
	require.NoError(t, s.Tell(ctx, hot, stepGateOr{gate, released}))
	for range after {
		require.NoError(t, s.Tell(ctx, hot, stepWork{afterWork}))
	}
	waitBacklog(t, s, before+1+after) // all in hot's backlog, behind its await
	close(awaited)
	<-gate.begun
	return gate
}

// askBesideGate asks the neighbour other while gate's step holds the
// partition, then opens the gate: the ask must be answered first.
func askBesideGate(ctx context.Context, t *testing.T, s *silo.Silo, other grain.ID, gate stepGate, why string) {
	t.Helper()
	askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reply, err := silo.Call[string](askCtx, s, other, stepWork{})
	close(gate.release)
	require.NoError(t, err, why)
	require.Equal(t, "served", reply)
}

// With more than one core, a message for a grain of a partition whose
// owner runs a step of a flood of slow turns runs at once, on another
// core: its sender hands the partition off from the step (stepoff.go).
// The flood's gate step here waits until the neighbour has its answer,
// and the handoff monitor, its threshold an hour, never takes it: without
// the step-off, the ask would wait for the gate for good.
func TestANeighbourOfAFloodsSlowStepRunsWhileTheStepRuns(t *testing.T) {
	s, ctx, hot, other := floodBeside(t)
	gate := gatedFlood(ctx, t, s, hot, 8, 24, time.Microsecond) // a flood's backlog behind the gate
	askBesideGate(ctx, t, s, other, gate, "the neighbour waited for the flood's step")
	st := s.Stats()
	require.EqualValues(t, 1, st.StepOffs)
	require.GreaterOrEqual(t, st.Handoffs, st.StepOffs)

	floodsGoOn(ctx, t, s, hot)
}

// A flood's last steps are stepped off too: a grain whose flood steps were
// measured slow keeps the mark to its last message, though fewer than a
// flood's depth (floodDepth) then wait. Cut off at the depth, a flood of
// 200 µs turns ran its last fifteen in a row, its neighbours waiting for
// them all. Here the gate is the flood's fifth message from its end, and
// waits until the neighbour has its answer.
func TestANeighbourStepsOffAFloodsLastSteps(t *testing.T) {
	s, ctx, hot, other := floodBeside(t)
	// A deep flood before the gate, its steps measured slow; four behind.
	gate := gatedFlood(ctx, t, s, hot, 32, 4, 100*time.Microsecond)
	askBesideGate(ctx, t, s, other, gate, "the neighbour waited for the flood's last steps")
	require.EqualValues(t, 1, s.Stats().StepOffs)

	floodsGoOn(ctx, t, s, hot)
}

// A neighbour's message that came while no step of a slow flood was
// published ends the flood's steps at the next: the owner reads the queue
// and runs it, rather than after the flood's share of steps. On one core
// no step is published (a step-off needs a second core), so every
// neighbour's message comes that way. Here a message to a third grain,
// sent while the flood's first gate waits, ends a round's steps, and the
// next round's first step is the flood's second gate; the neighbour's
// message, sent while that one waits, must run before any of the flood's
// steps behind it — with the share, 200 µs, two of them ran first.
func TestANeighboursMessageEndsAFloodsSteps(t *testing.T) {
	prev := runtime.GOMAXPROCS(1) // before Start, which reads it
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	s := newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "stepper", func(grain.ID) stepper { return stepper{} }))
	})
	ctx := ctxT(t)
	hot := grain.NewID("stepper", "hot")
	other, third := grain.NewID("stepper", "other"), grain.NewID("stepper", "third")
	for _, id := range []grain.ID{other, third} { // active before the flood
		_, err := silo.Call[string](ctx, s, id, stepWork{})
		require.NoError(t, err)
	}

	awaited, released := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(released) })
	require.NoError(t, s.Tell(ctx, hot, stepAwait{awaited}))
	const before, after = 32, 32
	for range before {
		require.NoError(t, s.Tell(ctx, hot, stepWork{100 * time.Microsecond}))
	}
	gates := []stepGate{{make(chan struct{}), make(chan struct{})}, {make(chan struct{}), make(chan struct{})}}
	for _, g := range gates {
		require.NoError(t, s.Tell(ctx, hot, stepGateOr{g, released}))
	}
	var ran atomic.Int64 // the flood's steps behind the gates that ran
	for range after {
		require.NoError(t, s.Tell(ctx, hot, stepCount{100 * time.Microsecond, &ran}))
	}
	waitBacklog(t, s, before+len(gates)+after)
	close(awaited)

	<-gates[0].begun
	require.NoError(t, s.Tell(ctx, third, stepWork{})) // ends the round's steps
	close(gates[0].release)
	<-gates[1].begun
	seen := make(chan int64, 1)
	require.NoError(t, s.Tell(ctx, other, stepSeen{&ran, seen})) // pushed: the gate waits meanwhile
	close(gates[1].release)
	select {
	case n := <-seen:
		require.Zero(t, n, "the neighbour's message waited for the flood's steps")
	case <-ctx.Done():
		t.Fatal("the neighbour's message never ran")
	}
	floodsGoOn(ctx, t, s, hot)
}

// Two grains flooded at once step in turn, and a neighbour's message
// steps the partition off either's slow step: each has its own mark of
// slow steps and its own grace, and the new owner takes the message before
// the other flood's next step. Here each flood's gate step waits until a
// neighbour has its answer, and the monitor never takes a turn: with one
// flood's steps published at a time (a single mark, a single grace), or a
// new owner going on with the other flood's steps first, one of the two
// asks would wait for a gate for good.
func TestANeighbourStepsOffEitherOfTwoFloods(t *testing.T) {
	s := stepperSilo(t)
	ctx := ctxT(t)
	hot := []grain.ID{grain.NewID("stepper", "hot1"), grain.NewID("stepper", "hot2")}
	other := grain.NewID("stepper", "other")
	_, err := silo.Call[string](ctx, s, other, stepWork{}) // active before the floods
	require.NoError(t, err)

	const before, after = 8, 24 // slow steps before each gate, and behind it
	awaited := make(chan struct{})
	var gates []stepGate
	released := make(chan struct{})
	t.Cleanup(func() { close(released) }) // before the silo's shutdown: a gate left shut on a failure opens
	for _, h := range hot {
		require.NoError(t, s.Tell(ctx, h, stepAwait{awaited}))
	}
	for _, h := range hot {
		for range before {
			require.NoError(t, s.Tell(ctx, h, stepWork{100 * time.Microsecond}))
		}
		gate := stepGate{make(chan struct{}), make(chan struct{})}
		gates = append(gates, gate)
		require.NoError(t, s.Tell(ctx, h, stepGateOr{gate, released}))
		for range after {
			require.NoError(t, s.Tell(ctx, h, stepWork{time.Microsecond}))
		}
	}
	waitBacklog(t, s, 2*(before+1+after)) // all in the backlogs, behind the awaits
	close(awaited)

	// The floods step in turn; whichever gate begins first, a neighbour's
	// ask steps it off, and then the other's.
	askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var open []stepGate
	for range gates {
		var g stepGate
		select {
		case <-gates[0].begun:
			g, gates[0].begun = gates[0], nil
		case <-gates[1].begun:
			g, gates[1].begun = gates[1], nil
		case <-askCtx.Done():
			t.Fatal("a flood's gate never began")
		}
		open = append(open, g)
		reply, err := silo.Call[string](askCtx, s, other, stepWork{})
		require.NoError(t, err, "the neighbour waited for a flood's step (%d gates begun)", len(open))
		require.Equal(t, "served", reply)
	}
	for _, g := range open {
		close(g.release)
	}
	st := s.Stats()
	require.EqualValues(t, 2, st.StepOffs)

	floodsGoOn(ctx, t, s, hot...)
}

// A new owner that a neighbour's message stepped off a flood's step
// delivers that message before the round's other steps. Two grains are
// flooded at once, their messages sent one after another (a streak: each
// steps from its mailbox after a few slow ones), and past the first
// twenty each blocks until the neighbour has its answer: the first to
// begin is stepped off for the neighbour's ask, and the other flood's is
// the round's next step. Taken before the ask, it would wait for the
// answer, and the ask for it.
func TestASteppedOffOwnerTakesTheMessageBeforeTheNextStep(t *testing.T) {
	s := stepperSilo(t)
	ctx := ctxT(t)
	hot := []grain.ID{grain.NewID("stepper", "hot1"), grain.NewID("stepper", "hot2")}
	other := grain.NewID("stepper", "other")
	for _, id := range append(hot, other) { // active before the floods
		_, err := silo.Call[string](ctx, s, id, stepWork{})
		require.NoError(t, err)
	}
	const slow, blocked = 20, 20
	begun, open, ended := make(chan struct{}, 2*blocked), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(ended) }) // a step left blocked on a failure ends
	for _, h := range hot {
		for range slow {
			require.NoError(t, s.Tell(ctx, h, stepWork{100 * time.Microsecond}))
		}
		for range blocked {
			require.NoError(t, s.Tell(ctx, h, stepBlock{begun, open, ended}))
		}
	}
	<-begun
	askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reply, err := silo.Call[string](askCtx, s, other, stepWork{})
	close(open)
	require.NoError(t, err, "the neighbour's ask waited behind the next flood step")
	require.Equal(t, "served", reply)
	// One step-off at least: the ask's, unless a send of the test's to
	// the second flood stepped the first off earlier (its steps publish
	// after a few of its turns, and a message for another grain steps
	// them off, whoever sends it), the blocked step among them.
	require.NotZero(t, s.Stats().StepOffs)

	floodsGoOn(ctx, t, s, hot...)
}

// A flood's grain whose step a neighbour's message handed off stays
// served: its full backlog holds its senders at its door through the
// step-off, as through a step on the partition, and nothing it is sent is
// refused or dropped (the grace of holdgrace.go). Otherwise a step-off,
// its grain's turn off the partition, would apply the overflow policy to
// the flood's next message.
func TestAFloodsStepOffsRefuseNothing(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a step-off needs a second core")
	}
	for _, policy := range []silo.Overflow{silo.RejectNewest, silo.DropOldest} {
		t.Run(policyName(policy), func(t *testing.T) {
			const (
				flood = 300
				limit = 8
				work  = 500 * time.Microsecond
			)
			var done atomic.Int64
			s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "flooded", func(grain.ID) flooded { return flooded{&done, work} },
					silo.WithMaxBacklog(limit, policy)))
			})
			ctx := ctxT(t)
			hot, other := grain.NewID("flooded", "hot"), grain.NewID("flooded", "other")
			_, err := silo.Call[int64](ctx, s, other, "")
			require.NoError(t, err)
			asked := make(chan int)
			go func() { // the neighbour, asked until the flood is over
				n := 0
				for done.Load() < flood {
					if _, err := silo.Call[int64](ctx, s, other, ""); err != nil {
						break
					}
					n++
				}
				asked <- n
			}()
			refused := tellFlood(t, ctx, s, hot, flood)
			n, asksRefused, err := askHowMany(ctx, s, hot)
			refused += asksRefused
			require.NoError(t, err)
			asks := <-asked
			st := s.Stats()
			t.Logf("%d asks of the neighbour, %d step-offs, %d handoffs, %d backlog holds; %d refused, %d dead letters",
				asks, st.StepOffs, st.Handoffs, st.BacklogHolds, refused, st.DeadLetters[grain.ReasonOverload])
			if st.Handoffs > st.StepOffs {
				// The monitor took a turn whose goroutine waited for a core
				// (a loaded machine): that may refuse or drop, each a dead
				// letter (TestAFloodPastTheBacklogLimitOfAServedGrainWaitsForRoom)
				// — the whole flood, if the turn it took was one that ran
				// as it came, before the flood's steps began (two race
				// runs at once: 278 of 300 dropped, no step taken).
				require.EqualValues(t, flood, int(n)+int(st.DeadLetters[grain.ReasonOverload]), "handled or a dead letter: every tell")
				return
			}
			require.NotZero(t, st.StepOffs, "no ask came during a step")
			require.NotZero(t, st.BacklogHolds, "the flood's backlog never held its senders")
			require.Zero(t, refused)
			require.EqualValues(t, flood, n, "every tell handled")
			require.Empty(t, st.DeadLetters)
		})
	}
}

// A silo closed while its senders step a flood's turns off the partition
// stops cleanly: every caller has its answer or an error, Close returns,
// and no goroutine is left (goleak, TestMain). A sender inside a step-off
// counts a turn; the partition's last owner waits for it before it leaves,
// since Close waits for the owners and then for the turns they counted.
func TestCloseWhileNeighboursStepOffAFlood(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a step-off needs a second core")
	}
	for round := range 10 {
		var done atomic.Int64
		s, err := silo.New(silo.Config{Partitions: 1})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "flooded", func(grain.ID) flooded { return flooded{&done, 100 * time.Microsecond} }))
		require.NoError(t, s.Start())
		ctx := ctxT(t)
		for range 2_000 {
			require.NoError(t, s.Tell(ctx, grain.NewID("flooded", "hot"), struct{}{}))
		}
		errs := make(chan error, 4)
		for c := range 4 {
			go func() {
				for {
					if _, err := silo.Call[int64](ctx, s, grain.NewIntID("flooded", int64(c)), ""); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for s.Stats().StepOffs < uint64(10*(round+1)) && done.Load() < 2_000 {
			runtime.Gosched()
		}
		if round%2 == 0 {
			require.NoError(t, s.Close())
		} else {
			sctx, cancel := context.WithTimeout(ctx, time.Millisecond)
			err := s.Shutdown(sctx)
			cancel()
			if err != nil {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NoError(t, s.Close())
			}
		}
		for range 4 {
			require.ErrorIs(t, <-errs, silo.ErrSiloClosed)
		}
	}
}
