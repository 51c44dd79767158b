package silo_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

var (
	errSLOPassed  = errors.New("slo passed")
	errClientLeft = errors.New("client left")
)

// A ctx ended with a cause (context.WithTimeoutCause, WithCancelCause) is
// reported the same way wherever the silo meets it: an error that matches
// both ctx's error and the cause, and, for an ask past its deadline, a
// *grain.TimeoutError — whether the deadline passed while the ask waited or
// before it was sent. Before, the one that waited returned the bare cause:
// no TimeoutError, no context.DeadlineExceeded; the other lost the cause.
func TestAnEndedCtxsCauseIsKeptInEveryError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, _ := bubbleSilo(t, silo.Config{})
		id := grain.NewID("sleeper", "a")
		timedOut := func(t *testing.T, err error) {
			t.Helper()
			var te *grain.TimeoutError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, id, te.ID)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, err, errSLOPassed)
		}

		slo, cancel := context.WithTimeoutCause(t.Context(), time.Second, errSLOPassed)
		defer cancel()
		_, err := s.Ask(slo, id, waitForCtx{}) // waits, and times out
		timedOut(t, err)
		_, err = s.Ask(slo, id, "hello") // its deadline past before it is sent
		timedOut(t, err)

		err = s.Tell(slo, id, "hello")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errSLOPassed)
		_, err = s.ActiveGrains(slo, "sleeper")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errSLOPassed)

		left, leave := context.WithCancelCause(t.Context())
		// The caller leaves while the ask waits (a timer on the bubble's clock).
		time.AfterFunc(time.Second, func() { leave(errClientLeft) })
		_, err = s.Ask(left, id, waitForCtx{})
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, errClientLeft)
		var te *grain.TimeoutError
		assert.NotErrorAs(t, err, &te, "a cancelled call did not time out")

		o, err := s.NewObserver(1)
		require.NoError(t, err)
		defer o.Close()
		_, err = o.Receive(left)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, errClientLeft)
	})
}

// Shutdown's ctx too: a Shutdown cut short reports the cause it was cut
// short with.
func TestAShutdownCutShortKeepsItsCtxsCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, _ := bubbleSilo(t, silo.Config{})
		asked := make(chan error, 1)
		go func() {
			_, err := s.Ask(t.Context(), grain.NewID("sleeper", "a"), waitForCtx{})
			asked <- err
		}()
		synctest.Wait() // the turn waits on its ctx, which only a close ends
		slo, cancel := context.WithTimeoutCause(t.Context(), time.Second, errSLOPassed)
		defer cancel()
		err := s.Shutdown(slo)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errSLOPassed)
		assert.Error(t, <-asked)
	})
}
