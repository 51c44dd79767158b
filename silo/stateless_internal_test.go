package silo

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// The deadlock graph keys its edges by identity, which a stateless
// worker's activations share. Were their waits in it, this would read as a
// cycle: one activation of w waits on a, and a waits on w — on another of
// w's activations, which waits on nothing and will answer. Such waits are
// not recorded (Ask asks kind.inWaitGraph), and a walk that meets such a
// grain gives no verdict.
func TestStatelessWorkersAreNotInTheDeadlockGraph(t *testing.T) {
	s, err := New(Config{Partitions: 2})
	require.NoError(t, err)
	defer s.Close()
	nop := func(grain.ID) *nopGrain { return &nopGrain{} }
	require.NoError(t, Register(s, "w", nop, WithStatelessWorker(2)))
	require.NoError(t, Register(s, "a", nop))
	assert.False(t, s.kinds["w"].inWaitGraph())
	assert.True(t, s.kinds["a"].inWaitGraph())

	ctx := t.Context()
	w, a := grain.NewID("w", "x"), grain.NewID("a", "y")
	fromW := queues.NewRequest(ctx, nil) // an activation of w calling a
	fromA := queues.NewRequest(ctx, nil) // a calling w
	s.waitsOf(w.Hash()).start(w, w.Hash(), fromW, a, a.Hash(), false, false)
	s.waitsOf(a.Hash()).start(a, a.Hash(), fromA, w, w.Hash(), false, false)
	// w's ask, queued behind a, whose turn waits on w.
	env := queues.Envelope{Target: a, Hash: a.Hash(), Request: fromW, Meta: &queues.Meta{Sender: w}}
	assert.Nil(t, s.closesCycle(&env))
}

// flaky is a stateless worker's grain that fails some messages.
type flaky struct{}

func (flaky) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if n := msg.(int); n%7 == 0 {
		panic("flaky")
	}
	return nil, nil
}

// The counts senders read are exact: once the silo is quiet they are zero
// in every partition, whatever became of the messages — handled, failed,
// dead letters of a Stop, of a quarantine, or refused at the door.
func TestStatelessWorkerCountsComeBackToZero(t *testing.T) {
	s, err := New(Config{Partitions: 3, Supervision: activation.Supervision{MaxRestarts: 3, Window: time.Hour, Quarantine: time.Hour}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, Register(s, "w", func(grain.ID) flaky { return flaky{} }, WithStatelessWorker(0), WithMaxBacklog(4, RejectNewest)))
	require.NoError(t, Register(s, "a", func(grain.ID) *nopGrain { return &nopGrain{} }))
	require.NoError(t, s.Start())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				id := grain.NewIntID("w", int64(i%5))
				if i%100 == 50 {
					_ = s.Stop(ctx, id)
				}
				if g%2 == 0 {
					_ = s.Tell(ctx, id, i)
				} else {
					_, _ = s.Ask(ctx, id, i)
				}
			}
		})
	}
	wg.Wait()
	// A barrier on every partition: an ask to a grain of each, after
	// everything above was delivered; then every turn has finished.
	for i := range 64 {
		_, err := s.Ask(ctx, grain.NewIntID("a", int64(i)), 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.Shutdown(ctx))
	for i, p := range s.parts {
		assert.Zero(t, p.swQueued.Load(), "partition %d: queued", i)
		assert.Zero(t, p.swBusy.Load(), "partition %d: busy", i)
	}
	st := s.Stats()
	assert.NotZero(t, st.DeadLetters[grain.ReasonStopped]+st.DeadLetters[grain.ReasonQuarantined], "some messages were dead letters")
}

// A quarantined stateless identity weighs on its partition's load until
// its quarantine ends, at an idle tick or at the next message.
func TestStatelessWorkerQuarantineEndsInTheLoad(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{Partitions: 2, Clock: clk, IdleQuantum: time.Second,
		Supervision: activation.Supervision{MaxRestarts: 1, Window: time.Hour, Quarantine: 10 * time.Second}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, Register(s, "w", func(grain.ID) flaky { return flaky{} }, WithStatelessWorker(0)))
	require.NoError(t, Register(s, "a", func(grain.ID) *nopGrain { return &nopGrain{} }))
	require.NoError(t, s.Start())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sick := func() (n int64) {
		for _, p := range s.parts {
			n += p.swSick.Load()
		}
		return n
	}
	for s.Stats().Stops == 0 {
		_, _ = s.Ask(ctx, grain.NewIntID("w", 1), 7) // 7 panics
	}
	require.EqualValues(t, s.Stats().Stops, sick())
	for range 11 {
		clk.Advance(time.Second)
	}
	// The idle ticks were queued on every partition's control lane; an ask
	// to a grain of each partition, read after them, is a barrier.
	for part := range s.parts {
		for k := int64(0); ; k++ {
			if id := grain.NewIntID("a", k); s.locator.LocateHash(id.Hash()).Partition == part {
				_, err := s.Ask(ctx, id, 1)
				require.NoError(t, err)
				break
			}
		}
	}
	assert.Zero(t, sick())
}
