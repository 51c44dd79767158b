package silo

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// An owner yields for the callers it answered unless the scheduler is
// crowded by many more goroutines than those: the yield would wait for all
// of them.
func TestYieldsForWeighsTheCrowdAgainstTheCallersAnswered(t *testing.T) {
	var s Silo
	require.True(t, s.yieldsFor(0), "not crowded: always")
	s.dog.crowded.Store(true)
	s.dog.runnable.Store(1000)
	require.False(t, s.yieldsFor(0), "crowded, none answered")
	require.False(t, s.yieldsFor(62), "crowded, 62 answered: 992 for 1,000 waiting")
	require.True(t, s.yieldsFor(63), "crowded, 63 answered: 1,008 for 1,000 waiting")
}

// An owner working down a backlog on a crowded scheduler does not yield at
// the end of each round when it answered no one there: each yield waited
// for every goroutine waiting for a core — a thousand callers whose asks
// timed out, their goroutines woken by their timers — and the owners ran
// two thirds of the turns the floor's design ran.
func TestAnOwnerDoesNotYieldBehindACrowdItDidNotAnswer(t *testing.T) {
	// The monitor never looks (an hour's threshold): crowded stays as
	// set, and no turn is handed off.
	s, err := New(Config{Partitions: 1, HandoffThreshold: time.Hour})
	require.NoError(t, err)
	spinning, stop := make(chan struct{}), make(chan struct{})
	var release atomic.Bool
	require.NoError(t, Register(s, "g", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
			if msg == "spin" { // hold the partition while the backlog is sent
				close(spinning)
				for !release.Load() {
					runtime.Gosched()
				}
				return nil, nil
			}
			for end := time.Now().Add(20 * time.Microsecond); time.Now().Before(end); {
			}
			return nil, nil
		}
	}))
	require.NoError(t, Register(s, "loop", func(grain.ID) grain.Func {
		return func(ctx context.Context, gc *grain.Context, _ any) (any, error) {
			select {
			case <-stop:
				return nil, nil
			default: // a message queued at every round: the backlog's share ends it
				return nil, gc.Silo().Tell(ctx, gc.ID(), 0)
			}
		}
	}))
	require.NoError(t, s.Start())
	defer s.Close()
	s.dog.crowded.Store(true)
	s.dog.runnable.Store(1000)
	ctx := context.Background()
	id := grain.NewID("g", "flooded")
	require.NoError(t, s.Tell(ctx, id, "spin"))
	<-spinning
	require.NoError(t, s.Tell(ctx, grain.NewID("loop", "l"), 0))
	for range 2_000 { // a backlog of 40 ms of turns, worked down a share a round
		require.NoError(t, s.Tell(ctx, id, 0))
	}
	release.Store(true)
	_, err = s.Ask(ctx, id, 0) // behind every tell
	require.NoError(t, err)
	close(stop)
	require.NoError(t, s.Close())
	p := s.parts[0] // its owner gone: its counts are still
	require.Less(t, p.yields, uint32(10), "the owner's yields and parks, in %d rounds", p.round/2)
}
