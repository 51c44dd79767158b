package silo_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// ctxKeeper hands the ctx of its OnActivate (hook) or of each turn (turns) to
// the test, and returns only once gate closes, ignoring that ctx — never
// asking it for Done, as code that only checks Err now and then does not.
type ctxKeeper struct {
	hook, turns chan<- context.Context
	gate        <-chan struct{}
}

func (k *ctxKeeper) OnActivate(ctx context.Context, _ *grain.Context) error {
	if k.hook != nil {
		k.hook <- ctx
		<-k.gate
	}
	return nil
}

func (k *ctxKeeper) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	if k.turns != nil {
		k.turns <- ctx
		<-k.gate
	}
	return "ok", nil
}

// ctxKeeperSilo starts a silo of one partition on the bubble's clock, with a
// kind "keep" of ctxKeepers.
func ctxKeeperSilo(t *testing.T, cfg silo.Config, k ctxKeeper) *silo.Silo {
	t.Helper()
	cfg.Partitions = 1
	s, err := silo.New(cfg)
	require.NoError(t, err)
	require.NoError(t, silo.Register(s, "keep", func(grain.ID) *ctxKeeper { return &k }))
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A handler's ctx that ended before its turn did — a hook the silo gave
// up on (Config.ActivationTimeout), a call whose caller gave up — says how
// it ended for good: its Err and its cause do not turn into the turn's
// end's Canceled once the handler returns, for a goroutine of its that kept
// the ctx (a context's Err, once non-nil, returns the same error). They
// did whenever the handler had not asked the ctx for Done: the clients'
// model test found a given-up OnActivate's ctx saying Canceled.
func TestAHandlersCtxEndedBeforeItsTurnSaysSoAfterTheTurn(t *testing.T) {
	t.Run("a hook given up on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			hooks, gate := make(chan context.Context, 1), make(chan struct{})
			s := ctxKeeperSilo(t, silo.Config{ActivationTimeout: 30 * time.Millisecond}, ctxKeeper{hook: hooks, gate: gate})
			dl := s.SubscribeDeadLetters(4)
			require.NoError(t, s.Tell(t.Context(), grain.NewID("keep", "k"), "first"))
			hctx := <-hooks
			d := <-dl.C // given up on: its first message a dead letter
			require.Equal(t, grain.ReasonActivationFailed, d.Reason)
			require.ErrorIs(t, hctx.Err(), context.DeadlineExceeded, "the give-up ended the hook's ctx")

			staysDeadlineExceeded(t, hctx, gate)
		})
	})
	t.Run("a call past the default call timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			turns, gate := make(chan context.Context, 1), make(chan struct{})
			s := ctxKeeperSilo(t, silo.Config{CallTimeout: 30 * time.Millisecond}, ctxKeeper{turns: turns, gate: gate})
			asked := make(chan error, 1)
			go func() { _, err := s.Ask(t.Context(), grain.NewID("keep", "k"), "hi"); asked <- err }()
			tctx := <-turns
			require.ErrorIs(t, <-asked, context.DeadlineExceeded)
			require.ErrorIs(t, tctx.Err(), context.DeadlineExceeded, "the handler's ctx ended with the call")

			staysDeadlineExceeded(t, tctx, gate)
		})
	})
	t.Run("a call whose caller's deadline passed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			turns, gate := make(chan context.Context, 1), make(chan struct{})
			s := ctxKeeperSilo(t, silo.Config{}, ctxKeeper{turns: turns, gate: gate})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
			defer cancel()
			asked := make(chan error, 1)
			go func() { _, err := s.Ask(ctx, grain.NewID("keep", "k"), "hi"); asked <- err }()
			tctx := <-turns
			require.ErrorIs(t, <-asked, context.DeadlineExceeded)
			require.ErrorIs(t, tctx.Err(), context.DeadlineExceeded, "the handler's ctx ended with its caller's")

			staysDeadlineExceeded(t, tctx, gate)
		})
	})
}

// staysDeadlineExceeded lets the handler holding ctx return (gate), waits
// for its turn to end, and checks that ctx still says DeadlineExceeded —
// its Err, its cause, and once it has a Done channel.
func staysDeadlineExceeded(t *testing.T, ctx context.Context, gate chan struct{}) {
	t.Helper()
	close(gate)
	synctest.Wait() // the handler has returned, and its turn ended
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "and once it has a Done channel")
}
