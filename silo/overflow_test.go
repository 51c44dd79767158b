package silo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A backlog limit holds for what was already on its way, too: a loop of
// tells to a grain blocked in a turn, with nothing between them, leaves at
// most the limit waiting; the rest are refused at the call (ErrOverloaded)
// or, sent before the refusals began, become dead letters (overload) — all
// of them one or the other, none lost. The backlog passed its limit by all
// that was in flight: with a limit of 10, every one of the 100 was taken.
func TestRejectNewestHoldsTheLimitAgainstWhatWasInFlight(t *testing.T) {
	const limit, sent = 10, 100
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "printer", func(grain.ID) *printer { return &printer{} },
			silo.WithMaxBacklog(limit, silo.RejectNewest)))
	})
	ctx := ctxT(t)
	id := grain.NewID("printer", "jammed")
	started, release := make(chan struct{}), make(chan struct{})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	require.NoError(t, s.Tell(ctx, id, holdUntil{started, release}))
	<-started
	refused := 0
	for range sent {
		err := s.Tell(ctx, id, printDoc{})
		if err != nil {
			require.ErrorIs(t, err, silo.ErrOverloaded)
			refused++
		}
	}
	// Every message past the limit is a dead letter once the jammed turn
	// has been handed off — at once, or when the grace for a turn that
	// may only wait for a core is over (holdgrace.go).
	require.Eventually(t, func() bool {
		return s.Stats().DeadLetters[grain.ReasonOverload] == sent-limit
	}, 10*time.Second, 100*time.Microsecond, "dead letters past the limit")
	_, err := s.Ask(ctx, id, printDoc{})
	require.ErrorIs(t, err, silo.ErrOverloaded, "full: an ask fails at once")
	close(release)
	released = true
	waitBacklog(t, s, 0) // it works its backlog off, and takes messages again
	jobs, err := silo.Call[int](ctx, s, id, printDoc{})
	require.NoError(t, err)
	assert.Equal(t, limit+1, jobs, "the limit's worth waited, and ran")
	assert.Equal(t, uint64(sent-limit+1), s.Stats().DeadLetters[grain.ReasonOverload], "%d of them refused at the call", refused)
}

// A timer's tick waiting behind a blocked turn is no message anyone sent:
// a full backlog drops the oldest message past it (DropOldest), and the
// timer goes on ticking once the turn ends. Dropped as the oldest, the tick
// was a dead letter, and its timer never ticked again — its next tick is
// scheduled only once a tick has run.
func TestDropOldestKeepsATimersTick(t *testing.T) {
	const limit = 3
	ticks := make(chan struct{}, 64)
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "metronome", func(grain.ID) *metronome { return &metronome{ticks} },
			silo.WithMaxBacklog(limit, silo.DropOldest)))
	})
	dl := s.SubscribeDeadLetters(64)
	defer dl.Cancel()
	ctx := ctxT(t)
	id := grain.NewID("metronome", "m")
	_, err := s.Ask(ctx, id, startBeat{time.Millisecond})
	require.NoError(t, err)
	<-ticks // it ticks
	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Tell(ctx, id, holdUntil{started, release}))
	<-started
	waitBacklog(t, s, 1) // a tick waits behind the jammed turn
	for range limit + 5 {
		require.NoError(t, s.Tell(ctx, id, printDoc{}))
	}
	require.Eventually(t, func() bool { return s.Stats().DeadLetters[grain.ReasonOverload] == 6 },
		10*time.Second, 100*time.Microsecond, "the oldest messages dropped past the tick")
	close(release)
	for range 3 { // the tick that waited, and the timer's next ones
		select {
		case <-ticks:
		case <-ctx.Done():
			t.Fatal("the timer stopped ticking")
		}
	}
	for range 6 {
		d := <-dl.C
		assert.Equal(t, printDoc{}, d.Msg, "a message dropped, not the tick")
	}
}

func TestOverflowPoliciesNameThemselves(t *testing.T) {
	assert.Equal(t, "RejectNewest", silo.RejectNewest.String())
	assert.Equal(t, "DropOldest", silo.DropOldest.String())
	assert.Equal(t, "Overflow(7)", silo.Overflow(7).String())
}

// metronome ticks on a timer and tells each tick on a channel; it jams on
// holdUntil as the printer does.
type metronome struct{ ticks chan<- struct{} }

type (
	startBeat struct{ every time.Duration }
	beat      struct{}
)

func (m *metronome) Receive(_ context.Context, gc *grain.Context, msg any) (any, error) {
	switch v := msg.(type) {
	case startBeat:
		return nil, gc.StartTimer("beat", v.every, v.every, beat{})
	case beat:
		select {
		case m.ticks <- struct{}{}:
		default:
		}
	case holdUntil:
		close(v.started)
		<-v.release
	case printDoc:
	default:
		return nil, errors.New("metronome: unknown message")
	}
	return nil, nil
}
