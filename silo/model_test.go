package silo_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// The model test's grain: a number, and messages that change it, read it,
// fail, crash, or call another grain.
type (
	mAdd   struct{ v int }
	mGet   struct{}
	mFail  struct{}
	mCrash struct{}
	mCall  struct {
		to grain.ID
		v  int
	}
	mKeep  struct{ d time.Duration } // DelayDeactivation
	mLeave struct{}                  // DeactivateOnIdle
)

var errModel = errors.New("model: failed on purpose")

type modelGrain struct {
	n    int
	gone chan<- grain.ID
}

func (g *modelGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case mAdd:
		g.n += m.v
		return g.n, nil
	case mGet:
		return g.n, nil
	case mFail:
		return nil, errModel
	case mCrash:
		panic("model: crash")
	case mCall:
		return silo.Call[int](ctx, c.Silo(), m.to, mAdd{m.v})
	case mKeep:
		c.DelayDeactivation(m.d)
		return g.n, nil
	case mLeave:
		c.DeactivateOnIdle()
		return g.n, nil
	}
	return nil, fmt.Errorf("model: unexpected %T", msg)
}

func (g *modelGrain) OnDeactivate(_ context.Context, c *grain.Context) error {
	g.gone <- c.ID()
	return nil
}

// TestAgainstAModel drives a silo with random operations from one sender —
// asks and tells, failures, crashes, calls between grains, Deactivate,
// Stop, idle deactivation on a manual clock — and checks every reply
// against a model of what a grain's state must be: each grain's messages
// in the order sent, its state kept across errors and while
// DelayDeactivation holds it through idle rounds, fresh after a restart or
// any deactivation (DeactivateOnIdle's too), and nothing lost.
func TestAgainstAModel(t *testing.T) {
	// Four seeds of 800 operations: about 0.3 s, or 7 s under -race; for
	// more, change the counts (twelve of 1,500 ran clean when it was
	// written).
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { runModel(t, seed, 800) })
	}
}

func runModel(t *testing.T, seed uint64, ops int) {
	const (
		grains = 12
		idleTO = time.Hour
	)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gone := make(chan grain.ID, ops) // room for every report: a full one would block an OnDeactivate
	s := newSilo(t, silo.Config{
		Clock: clk, Partitions: 3, IdleTimeout: idleTO, IdleQuantum: time.Second,
		// Each crash is alone in its window (the clock moves a millisecond
		// after it): every restart is immediate.
		Supervision: activation.Supervision{MaxRestarts: 5, Window: time.Microsecond},
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "m", func(grain.ID) *modelGrain { return &modelGrain{gone: gone} }))
	})
	ctx := ctxT(t)
	r := rand.New(rand.NewPCG(seed, 99))
	ids := make([]grain.ID, grains)
	for i := range ids {
		ids[i] = grain.NewIntID("m", int64(i))
	}
	model := make([]int, grains)
	active := make([]bool, grains)
	var now time.Duration                 // the clock, from the start
	kept := make([]time.Duration, grains) // DelayDeactivation holds the grain until then
	pending := make([]bool, grains)       // a tell sent and not yet followed by an ask
	crashes := 0
	ask := func(i int, msg any) (int, error) {
		pending[i], active[i] = false, true
		return silo.Call[int](ctx, s, ids[i], msg)
	}
	expect := func(op string, i int, want int, msg any) {
		t.Helper()
		got, err := ask(i, msg)
		require.NoError(t, err, "%s on %v", op, ids[i])
		require.Equal(t, want, got, "%s on %v", op, ids[i])
	}
	settle := func(i int) { // a barrier: what was told has been handled
		if pending[i] {
			expect("barrier", i, model[i], mGet{})
		}
	}
	// Deactivate and Stop return at once: the grain's OnDeactivate reports
	// later. leaving counts the reports still to come that way.
	leaving := map[grain.ID]int{}
	leave := func(i int) {
		if active[i] {
			leaving[ids[i]]++
		}
		model[i], active[i], kept[i] = 0, false, 0
	}
	for range ops {
		i := r.IntN(grains)
		switch op := r.IntN(100); {
		case op < 30:
			v := r.IntN(10) + 1
			model[i] += v
			expect("ask add", i, model[i], mAdd{v})
		case op < 50:
			v := r.IntN(10) + 1
			model[i] += v
			require.NoError(t, s.Tell(ctx, ids[i], mAdd{v}))
			pending[i], active[i] = true, true
		case op < 62:
			expect("get", i, model[i], mGet{})
		case op < 67:
			_, err := ask(i, mFail{})
			require.ErrorIs(t, err, errModel, "an error resumes: the state stays")
		case op < 72:
			_, err := ask(i, mCrash{})
			require.ErrorIs(t, err, grain.ErrPanic)
			// Restarted: a fresh instance in the same activation, without
			// the old one's timers or DelayDeactivation.
			model[i], kept[i] = 0, 0
			crashes++
			clk.Advance(time.Millisecond)
			now += time.Millisecond
		case op < 84:
			j := r.IntN(grains)
			if j == i {
				j = (i + 1) % grains
			}
			v := r.IntN(10) + 1
			model[j] += v
			active[j], pending[j] = true, false
			expect("call", i, model[j], mCall{to: ids[j], v: v})
		case op < 87:
			settle(i)
			require.NoError(t, s.Deactivate(ctx, ids[i]))
			leave(i)
		case op < 89:
			// Kept through three idle rounds (1 h 2 s each), not four:
			// half an hour of margin either way.
			expect("keep", i, model[i], mKeep{3*idleTO + 30*time.Minute})
			kept[i] = now + 3*idleTO + 30*time.Minute
		case op < 90:
			expect("leave", i, model[i], mLeave{})
			leave(i)
		case op < 93:
			settle(i)
			require.NoError(t, s.Stop(ctx, ids[i]))
			leave(i)
		default:
			// Everyone idle: every active grain deactivates, and says so.
			for j := range ids {
				settle(j)
			}
			now += idleTO + 2*time.Second
			want := map[grain.ID]bool{}
			for j, a := range active {
				if !a || kept[j] > now {
					continue // kept: state and all
				}
				want[ids[j]] = true
				model[j], active[j], kept[j] = 0, false, 0
			}
			clk.Advance(idleTO + 2*time.Second)
			for len(want) > 0 {
				select {
				case id := <-gone:
					if leaving[id] > 0 {
						leaving[id]-- // an earlier Deactivate or Stop
						continue
					}
					require.True(t, want[id], "%v deactivated, not expected to be active", id)
					delete(want, id)
				case <-ctx.Done():
					t.Fatalf("still active after the idle timeout: %v", want)
				}
			}
		}
	}
	for i := range ids {
		expect("final", i, model[i], mGet{})
	}
	st := s.Stats()
	require.Empty(t, st.DeadLetters, "nothing lost")
	require.Equal(t, uint64(crashes), st.Restarts)
	require.Zero(t, st.Stops)
}
