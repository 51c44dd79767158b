package silo_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// stuckLoad's OnActivate ignores its ctx until release is closed, then
// returns err; its handler counts the messages it ran.
type stuckLoad struct {
	in      chan<- struct{}
	release <-chan struct{}
	err     error
	ran     *atomic.Int32
}

func (g *stuckLoad) OnActivate(context.Context, *grain.Context) error {
	g.in <- struct{}{}
	<-g.release
	return g.err
}

func (g *stuckLoad) Receive(context.Context, *grain.Context, any) (any, error) {
	g.ran.Add(1)
	return nil, nil
}

// Close while an OnActivate that ignores its ctx still runs (handed off):
// the tell that activated the grain is a dead letter, reason shutdown, like
// the messages that waited behind it — published before Close returns, to
// subscribers that are still there. It was lost without a word if the
// hook then failed (its turn handed it back to a partition that had
// stopped), and run after Close if the hook succeeded.
func TestCloseTakesTheFirstMessageOfAStuckActivation(t *testing.T) {
	for _, hookErr := range []error{nil, errors.New("load failed")} {
		for _, timeout := range []time.Duration{0, -1} { // the default, and none
			t.Run(fmt.Sprintf("err=%v/ActivationTimeout=%v", hookErr, timeout), func(t *testing.T) {
				in, release := make(chan struct{}, 1), make(chan struct{})
				var ran atomic.Int32
				s, err := silo.New(silo.Config{ActivationTimeout: timeout, DeactivationTimeout: time.Millisecond})
				require.NoError(t, err)
				require.NoError(t, silo.Register(s, "stuck", func(grain.ID) *stuckLoad {
					return &stuckLoad{in: in, release: release, err: hookErr, ran: &ran}
				}))
				dl := s.SubscribeDeadLetters(16)
				require.NoError(t, s.Start())
				ctx := ctxT(t)
				id := grain.NewID("stuck", "s")

				require.NoError(t, s.Tell(ctx, id, "first")) // activates: the hook hangs
				<-in
				require.NoError(t, s.Tell(ctx, id, "second"))
				waitBacklog(t, s, 1) // the partition was handed off: its new owner queued "second"

				require.NoError(t, s.Close()) // waits a millisecond for the hook, in vain
				close(release)                // the hook returns after the silo has stopped

				got := map[any]grain.Reason{}
				for d := range dl.C { // closed by Close, after what it published
					got[d.Msg] = d.Reason
				}
				assert.Equal(t, map[any]grain.Reason{"first": grain.ReasonShutdown, "second": grain.ReasonShutdown}, got)
				assert.Equal(t, uint64(2), s.Stats().DeadLetters[grain.ReasonShutdown])
				assert.Zero(t, ran.Load(), "no turn ran before Close returned")
			})
		}
	}
}

// A failed activation whose turn has got past its race with the owner, but
// not yet handed its first message back, when Close comes: the closing
// partition waits for the message (no user code holds it up any more)
// rather than stop first and leave it unread, lost without a word.
func TestCloseWaitsForTheFirstMessageAFailedActivationHandsBack(t *testing.T) {
	in, release := make(chan struct{}, 1), make(chan struct{})
	reached, goOn := make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	s, err := silo.New(silo.Config{DeactivationTimeout: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, silo.Register(s, "stuck", func(grain.ID) *stuckLoad {
		return &stuckLoad{in: in, release: release, err: errors.New("load failed"), ran: &ran}
	}))
	s.OnFailedActivation(func() { close(reached); <-goOn })
	dl := s.SubscribeDeadLetters(16)
	require.NoError(t, s.Start())
	ctx := ctxT(t)
	id := grain.NewID("stuck", "s")

	require.NoError(t, s.Tell(ctx, id, "first"))
	<-in
	require.NoError(t, s.Tell(ctx, id, "second"))
	waitBacklog(t, s, 1) // handed off: the new owner queued "second"
	close(release)
	<-reached // the hook failed; the turn holds "first"

	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	require.Eventually(t, func() bool { // closeAll has run: "second" is a dead letter
		return s.Stats().DeadLetters[grain.ReasonShutdown] == 1
	}, 10*time.Second, time.Millisecond)
	close(goOn)
	<-closed

	got := map[any]grain.Reason{}
	for d := range dl.C {
		got[d.Msg] = d.Reason
	}
	assert.Equal(t, map[any]grain.Reason{"first": grain.ReasonShutdown, "second": grain.ReasonShutdown}, got)
}

// ctxLoad's OnActivate waits for its ctx to end, and fails with its error,
// as a load from a database does when its ctx is cancelled.
type ctxLoad struct{ in chan<- struct{} }

func (g *ctxLoad) OnActivate(ctx context.Context, _ *grain.Context) error {
	g.in <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

func (g *ctxLoad) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

// Close while an OnActivate that heeds its ctx runs: the hook fails with
// context.Canceled because the silo closed, and what waited for it is the
// close's — dead letters with reason shutdown, an ask failing with
// ErrSiloClosed — as for a hook that ignores its ctx, not an activation
// failure its callers would take for the grain's. With the hook holding
// its partition, its failure came before the owner took Close's message:
// "activation failed", whose error matched context.Canceled alone.
func TestCloseEndsAnActivationThatHeedsItsCtxAsAShutdown(t *testing.T) {
	for _, threshold := range []time.Duration{time.Hour, time.Millisecond} { // held, handed off
		t.Run(fmt.Sprintf("HandoffThreshold=%v", threshold), func(t *testing.T) {
			in := make(chan struct{}, 1)
			s, err := silo.New(silo.Config{HandoffThreshold: threshold})
			require.NoError(t, err)
			require.NoError(t, silo.Register(s, "load", func(grain.ID) *ctxLoad { return &ctxLoad{in: in} }))
			dl := s.SubscribeDeadLetters(16)
			require.NoError(t, s.Start())
			asked := make(chan error, 1)
			go func() {
				_, err := s.Ask(context.Background(), grain.NewID("load", "a"), "get")
				asked <- err
			}()
			<-in
			require.NoError(t, s.Close())

			err = <-asked
			require.ErrorIs(t, err, grain.ErrSiloClosed)
			var dle *grain.DeadLetterError
			require.ErrorAs(t, err, &dle)
			assert.Equal(t, grain.ReasonShutdown, dle.Reason)
			got := map[grain.Reason]int{}
			for d := range dl.C {
				got[d.Reason]++
			}
			assert.Equal(t, map[grain.Reason]int{grain.ReasonShutdown: 1}, got)
		})
	}
}
