package silo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// why reports the reason of each OnDeactivate, and what its turns see.
type why struct {
	reasons chan<- grain.DeactivationReason
}

var errFatal = errors.New("fatal")

func (g why) Receive(_ context.Context, gc *grain.Context, msg any) (any, error) {
	switch msg {
	case "go":
		gc.DeactivateOnIdle()
	case "fail":
		return nil, errFatal
	}
	return gc.DeactivationReason(), nil
}

func (g why) OnDeactivate(_ context.Context, gc *grain.Context) error {
	g.reasons <- gc.DeactivationReason()
	return nil
}

// OnDeactivate learns why it runs, whichever of the seven causes it is —
// a Stop told apart from supervision's stop after a failure, whose state
// an OnDeactivate should not save; any other turn sees none.
func TestOnDeactivateKnowsWhy(t *testing.T) {
	var used atomic.Uint64
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reasons := make(chan grain.DeactivationReason, 16)
	s := newSilo(t, silo.Config{
		Clock: clk, Partitions: 1, IdleTimeout: time.Minute, IdleQuantum: time.Second,
		MaxActivations: 3, MemoryLimit: 1000, MemoryGauge: silo.MemoryGaugeFunc(used.Load),
	}, func(s *silo.Silo) {
		newWhy := func(grain.ID) why { return why{reasons} }
		require.NoError(t, silo.Register(s, "why", newWhy, silo.WithSupervision(activation.Supervision{
			Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive { return activation.Stop }),
		})))
		require.NoError(t, silo.Register(s, "pinned", newWhy, silo.WithIdleTimeout(-1)))
	})
	ctx := ctxT(t)
	ask := func(key string, msg any) {
		t.Helper()
		_, err := s.Ask(ctx, grain.NewID("why", key), msg)
		if msg != "fail" {
			require.NoError(t, err)
		}
	}
	expect := func(want grain.DeactivationReason) {
		t.Helper()
		assert.Equal(t, want, <-reasons)
	}

	r, err := silo.Call[grain.DeactivationReason](ctx, s, grain.NewID("why", "a"), "hi")
	require.NoError(t, err)
	assert.Equal(t, grain.DeactivationNone, r, "not in a turn other than OnDeactivate")

	ask("a", "go")
	expect(grain.DeactivationRequested)

	ask("b", "hi")
	require.NoError(t, s.Deactivate(ctx, grain.NewID("why", "b")))
	expect(grain.DeactivationRequested)

	ask("c", "hi")
	require.NoError(t, s.Stop(ctx, grain.NewID("why", "c")))
	expect(grain.DeactivationStopped)

	ask("d", "fail") // its Decider stops it: a failure, its state in doubt
	expect(grain.DeactivationFailed)

	ask("e", "hi")
	clk.Advance(2 * time.Minute)
	expect(grain.DeactivationIdle)

	for _, k := range []string{"f", "g", "h", "i"} { // one past the cap of 3
		ask(k, "hi")
		clk.Advance(time.Millisecond)
	}
	expect(grain.DeactivationEvicted)

	used.Store(2000)
	clk.Advance(time.Second)
	used.Store(0)
	_, err = s.Ask(ctx, grain.NewID("pinned", "p"), "hi") // a barrier: the tick has shed
	require.NoError(t, err)
	shed := s.Stats().Shed
	require.Positive(t, shed)
	for range shed {
		expect(grain.DeactivationMemoryPressure)
	}

	ask("j", "hi")
	require.NoError(t, s.Shutdown(ctx))
	close(reasons)
	var rest []grain.DeactivationReason
	for r := range reasons {
		rest = append(rest, r)
	}
	assert.NotEmpty(t, rest)
	for _, r := range rest {
		assert.Equal(t, grain.DeactivationShutdown, r)
	}
	// Stats counts them by reason too.
	assert.Equal(t, map[grain.DeactivationReason]uint64{
		grain.DeactivationRequested: 2, grain.DeactivationStopped: 1, grain.DeactivationFailed: 1, grain.DeactivationIdle: 1,
		grain.DeactivationEvicted: 1, grain.DeactivationMemoryPressure: shed,
		grain.DeactivationShutdown: uint64(len(rest)),
	}, s.Stats().Deactivations)
}
