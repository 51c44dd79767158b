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

// tidyHandler's turn runs until its ctx ends, then tidies up for a
// while (a tenth of a second) before it returns, and says it has.
type tidyHandler struct {
	began    chan<- struct{}
	returned *atomic.Bool
}

func (g tidyHandler) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	g.began <- struct{}{}
	<-ctx.Done()
	time.Sleep(100 * time.Millisecond) // the bubble's clock: tidying up
	g.returned.Store(true)
	return nil, nil
}

// A Close while a Shutdown runs returns as a Close does: once the turns
// in progress have returned, waiting at most Config.DeactivationTimeout
// for them. Before, whichever of the two finished the stop set the wait:
// when the Shutdown did, with no wait of its own, Close returned with the
// turns still running — and the several-clients model test found an
// activation's first message run after it, and a turn's sends made after
// it, neither yet handled nor a dead letter when its Close returned.
func TestACloseDuringAShutdownWaitsForTheTurnsAsACloseDoes(t *testing.T) {
	// Which of the two finishes the stop is a race: many rounds, so that
	// the Shutdown does in some (before the fix, a round of the 200 failed
	// in each of seven runs).
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			began := make(chan struct{}, 1)
			var returned atomic.Bool
			s, err := silo.New(silo.Config{Partitions: 1})
			require.NoError(t, err)
			require.NoError(t, silo.Register(s, "tidy", func(grain.ID) tidyHandler { return tidyHandler{began: began, returned: &returned} }))
			require.NoError(t, s.Start())
			ctx := t.Context()
			require.NoError(t, s.Tell(ctx, grain.NewID("tidy", "t"), "work"))
			<-began

			shut := make(chan error, 1)
			go func() { shut <- s.Shutdown(ctx) }() // no deadline: it settles for DeactivationTimeout, the turn stuck
			synctest.Wait()
			require.NoError(t, s.Close())
			assert.True(t, returned.Load(), "Close returned before the turn it ended")
			require.NoError(t, <-shut)
		})
	}
}

// adminGrain closes its own silo from a turn when told "close", and says
// so once Close has returned (it waits for no turn, its own among them);
// told "work", it runs until its ctx ends and then tidies up (tidyHandler).
type adminGrain struct {
	s      **silo.Silo
	closed chan<- struct{}
	tidyHandler
}

func (g adminGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "close" {
		_ = (*g.s).Close()
		g.closed <- struct{}{}
		return nil, nil
	}
	return g.tidyHandler.Receive(ctx, c, msg)
}

// A grain's turn that closes its silo waits for no turn — its own among
// them — but a Close from outside after it waits for them as a Close does
// (an admin grain ends the program's silo; main calls Close and exits).
// Before, that Close found the stop finished and returned at once, the
// other grain's turn still tidying up.
func TestACloseAfterAGrainClosedItsSiloWaitsForTheTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		began, closed := make(chan struct{}, 1), make(chan struct{}, 1)
		var returned atomic.Bool
		var s *silo.Silo
		s, err := silo.New(silo.Config{Partitions: 2})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "admin", func(grain.ID) adminGrain {
			return adminGrain{s: &s, closed: closed, tidyHandler: tidyHandler{began: began, returned: &returned}}
		}))
		require.NoError(t, s.Start())
		ctx := t.Context()
		require.NoError(t, s.Tell(ctx, grain.NewID("admin", "worker"), "work"))
		<-began
		require.NoError(t, s.Tell(ctx, grain.NewID("admin", "closer"), "close"))
		<-closed // the turn's Close has returned: the silo has stopped

		require.NoError(t, s.Close())
		assert.True(t, returned.Load(), "Close returned before the turn the closing ended")
		time.Sleep(time.Second) // the bubble's clock: whatever still tidies up, finishes
	})
}
