package silo_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// ioWaiter's turns block until their caller gives up, as a handler
// waiting on I/O does until its deadline.
type ioWaiter struct{}

func (ioWaiter) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A slow turn's line says how busy the process kept its cores meanwhile:
// a turn that computes kept one busy, a turn that blocks none — what a
// user reads to tell a handler that works from one that waits, or from a
// turn that waited for a core (coresbusy.go) — and, where the cores were
// all but idle, what to do about a turn that waits (reportSlow's hint).
func TestASlowTurnsLineSaysHowBusyTheCoresWere(t *testing.T) {
	if !silo.ProcessCPUKnown() {
		t.Skip("the platform does not tell the process's CPU time")
	}
	var mu sync.Mutex
	busy := map[string]float64{} // grain -> cores_busy
	hints := map[string]string{} // grain -> hint
	logger := slog.New(handlerFunc(func(r slog.Record) {
		if r.Message != "granary: slow turn held its partition" {
			return
		}
		var id, hint string
		share := -1.0
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "grain":
				id = a.Value.String()
			case "cores_busy":
				share = a.Value.Float64()
			case "hint":
				hint = a.Value.String()
			}
			return true
		})
		mu.Lock()
		busy[id], hints[id] = share, hint
		mu.Unlock()
	}))
	s := newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: 5 * time.Millisecond, Logger: logger},
		func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "spin", func(grain.ID) spinner { return spinner{} }))
			require.NoError(t, silo.Register(s, "nap", func(grain.ID) ioWaiter { return ioWaiter{} }))
		})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("spin", "works"), spin{200 * time.Millisecond})
	require.NoError(t, err)
	waitCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = s.Ask(waitCtx, grain.NewID("nap", "waits"), "read")
	require.ErrorIs(t, err, grain.ErrTimeout, "the waiting turn runs until its caller's deadline")
	// Both turns end about as their asks return; their lines come just
	// before the count (turn.go: endTurn, reportSlow).
	require.Eventually(t, func() bool { return s.Stats().SlowTurns >= 2 }, 5*time.Second, time.Millisecond)
	s.WaitLogged()

	mu.Lock()
	defer mu.Unlock()
	works, waits := busy["spin/works"], busy["nap/waits"]
	t.Logf("cores_busy: spinning %v, waiting %v", works, waits)
	require.GreaterOrEqual(t, works, 0.0, "the computing turn's line states the share")
	require.GreaterOrEqual(t, waits, 0.0, "the waiting turn's line states the share")
	require.LessOrEqual(t, works, 1.0)
	// The process did nothing but the spinning turn, and then nothing but
	// the monitor's looks while the other waited: whatever else shares the
	// machine, the first kept a core busier than the second.
	require.Greater(t, works, waits, "spinning: %v of the cores; waiting: %v", works, waits)
	// The waiting turn's line, its cores all but idle, says what to do
	// about a turn that waits.
	require.Contains(t, hints["nap/waits"], "WithBlockingTurns", "the waiting turn's line (cores_busy %v)", waits)
}
