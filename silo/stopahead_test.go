package silo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// busyFor is a tell whose turn keeps its partition busy for d.
type busyFor struct{ d time.Duration }

// sendOn is an ask whose turn asks grain to with msg and answers the error.
type sendOn struct {
	to  grain.ID
	msg any
}

type stopAheadGrain struct{ n int }

func (g *stopAheadGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case busyFor:
		for end := time.Now().Add(m.d); time.Now().Before(end); {
		}
	case sendOn:
		_, err := c.Silo().Ask(ctx, m.to, m.msg)
		return err, nil
	case incr:
		g.n += m.n
	}
	return g.n, nil
}

// A call a grain's turn makes after a Stop of the grain it calls goes to a
// fresh instance, as Silo.Stop says, however the partition orders the
// turns' sends (silo/ahead.go). The Stop draws its line by the places of
// the messages read with it; a call from a turn used to run ahead of its
// place while the owner was still delivering what came before the Stop,
// be judged by that place, and fail as stopped — 183 of 800 such calls
// here (found by TestAgainstAModelWithMessagesInFlight).
func TestACallFromATurnSentAfterAStopGoesToAFreshInstance(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "g", func(grain.ID) *stopAheadGrain { return &stopAheadGrain{} }))
	})
	ctx := ctxT(t)
	target := grain.NewID("g", "target")
	failed, calls := 0, 0
	for caller := range 4 { // some on the target's partition, some on the other
		from := grain.NewID("g", fmt.Sprint("caller", caller))
		for range 100 {
			_, err := s.Ask(ctx, target, incr{1}) // active
			require.NoError(t, err)
			// Messages the target's partition reads with the Stop, ahead of
			// it: slow turns, in which the caller's call comes.
			for j := range 20 {
				require.NoError(t, s.Tell(ctx, grain.NewIntID("g", int64(j)), busyFor{100 * time.Microsecond}))
			}
			require.NoError(t, s.Stop(ctx, target))
			reply, err := silo.Call[any](ctx, s, from, sendOn{target, incr{1}})
			require.NoError(t, err)
			calls++
			if reply != nil {
				failed++
				if failed == 1 {
					t.Logf("%v's call after the Stop: %v", from, reply)
				}
			}
		}
	}
	require.Zero(t, failed, "of %d calls sent after a Stop", calls)
}
