package silo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// tellThenSpin's turn tells to, says it has, and keeps its partition
// busy a while.
type tellThenSpin struct {
	to   grain.ID
	told chan struct{}
}

// failHard is an ask the clockGrain fails; its kind's supervision stops it.
type failHard struct{}

var errFailHard = errors.New("failed hard")

type clockGrain struct{}

func (clockGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case tellThenSpin:
		if err := c.Silo().Tell(ctx, m.to, get{}); err != nil {
			return nil, err
		}
		close(m.told)
		for end := time.Now().Add(2 * time.Millisecond); time.Now().Before(end); {
		}
	case failHard:
		return nil, errFailHard
	}
	return 1, nil
}

// A message a partition takes onto the batch it is reading — which it does
// once a turn has sent one there (silo/ahead.go) — is handled at the
// clock's reading after it was sent, not the round's from before: with a
// manual clock moved in between, a grain stopped by such a message was
// quarantined from the round's start, and answered again 10 s early (39
// runs of 50, found by TestAgainstAModelWithMessagesInFlight).
func TestAMessageTakenIntoARoundUnderWayReadsTheManualClockAfresh(t *testing.T) {
	for run := range 20 {
		clk := clock.NewManual(time.Unix(1_700_000_000, 0))
		stop := activation.Supervision{Quarantine: 3 * time.Second,
			Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive { return activation.Stop })}
		s := newSilo(t, silo.Config{Partitions: 1, Clock: clk}, func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "c", func(grain.ID) clockGrain { return clockGrain{} }, silo.WithSupervision(stop)))
		})
		ctx := ctxT(t)
		x, y, z, w := grain.NewID("c", "x"), grain.NewID("c", "y"), grain.NewID("c", "z"), grain.NewID("c", "w")
		for _, id := range []grain.ID{x, y, z, w} {
			_, err := s.Ask(ctx, id, get{})
			require.NoError(t, err)
		}
		// A round of two messages: x's turn sends y one, and while it
		// runs on, the clock moves and z is asked what stops it.
		told := make(chan struct{})
		require.NoError(t, s.Tell(ctx, x, tellThenSpin{y, told}))
		require.NoError(t, s.Tell(ctx, w, get{}))
		<-told
		clk.Advance(10 * time.Second)
		_, err := s.Ask(ctx, z, failHard{})
		require.ErrorIs(t, err, errFailHard)
		clk.Advance(2 * time.Second) // 1 s of its quarantine left
		_, err = s.Ask(ctx, z, get{})
		require.ErrorIs(t, err, grain.ErrGrainStopped, "run %d: answered 2 s into a quarantine of 3 s", run)
		clk.Advance(time.Second)
		_, err = s.Ask(ctx, z, get{})
		require.NoError(t, err, "run %d: the quarantine is over", run)
		require.NoError(t, s.Shutdown(ctx))
	}
}
