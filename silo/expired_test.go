package silo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// tally counts its activations and handled messages; "block" waits for the
// gate.
type tally struct {
	acts, handled *atomic.Int32
	gate          <-chan struct{}
	in            chan<- struct{}
}

func (g *tally) OnActivate(context.Context, *grain.Context) error { g.acts.Add(1); return nil }

func (g *tally) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "block" {
		g.in <- struct{}{}
		<-g.gate
		return nil, nil
	}
	g.handled.Add(1)
	return "ok", nil
}

// An ask whose caller gave up — its ctx cancelled or past its deadline, or
// the default call timeout passed — before its turn began is dropped as a
// dead letter with reason expired, as Orleans drops expired messages: a
// grain that fell behind does not run turns nobody waits for, nor does a
// grain get activated for one.
func TestAsksWhoseCallerGaveUpAreNotRun(t *testing.T) {
	var acts, handled atomic.Int32
	in, gate := make(chan struct{}), make(chan struct{})
	s := newSilo(t, silo.Config{
		Partitions:       1,
		CallTimeout:      20 * time.Millisecond,
		HandoffThreshold: time.Hour, // the blocked turn keeps the partition: messages wait in its queue
	}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "tally", func(grain.ID) *tally {
			return &tally{acts: &acts, handled: &handled, gate: gate, in: in}
		}))
	})
	ctx := ctxT(t)
	dl := s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	blocker, busy, fresh := grain.NewID("tally", "blocker"), grain.NewID("tally", "busy"), grain.NewID("tally", "fresh")
	_, err := silo.Call[string](ctx, s, busy, "warm up")
	require.NoError(t, err)
	require.NoError(t, s.Tell(ctx, blocker, "block"))
	<-in // the partition is held: what is sent now waits in its queue

	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = s.Ask(short, busy, "deadline")
	require.ErrorIs(t, err, grain.ErrTimeout)
	cancelled, cancelNow := context.WithCancel(ctx)
	asked := make(chan error, 1)
	go func() { _, err := s.Ask(cancelled, busy, "cancelled"); asked <- err }()
	require.Eventually(t, func() bool { return s.Stats().QueueDepth[0] == 2 }, 5*time.Second, time.Millisecond, "queued")
	cancelNow()
	require.ErrorIs(t, <-asked, context.Canceled)
	_, err = s.Ask(context.WithoutCancel(ctx), busy, "default timeout") // no deadline: Config.CallTimeout
	require.ErrorIs(t, err, grain.ErrTimeout)
	short2, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	_, err = s.Ask(short2, fresh, "first message of a grain")
	require.ErrorIs(t, err, grain.ErrTimeout)

	close(gate)
	n, err := silo.Call[string](ctx, s, busy, "after")
	require.NoError(t, err)
	assert.Equal(t, "ok", n)

	expired := map[any]bool{}
	for len(expired) < 4 {
		select {
		case d := <-dl.C:
			require.Equal(t, grain.ReasonExpired, d.Reason, "%v", d.Msg)
			assert.True(t, d.Ask)
			expired[d.Msg] = true
		case <-ctx.Done():
			t.Fatalf("expired dead letters: %v", expired)
		}
	}
	assert.Equal(t, map[any]bool{"deadline": true, "cancelled": true, "default timeout": true, "first message of a grain": true}, expired)
	assert.Equal(t, int32(2), handled.Load(), "only the warm-up and the last call ran")
	assert.Equal(t, int32(2), acts.Load(), "busy and blocker; fresh was never activated for nobody")
	assert.Equal(t, uint64(4), s.Stats().DeadLetters[grain.ReasonExpired])
}

// waitsForCtx waits in its turn until its ctx ends, and reports how.
type waitsForCtx struct{ ended chan error }

func (g waitsForCtx) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "wait" {
		<-ctx.Done()
		g.ended <- ctx.Err()
	}
	return "free", nil
}

// A caller whose ctx has no deadline gives up at Config.CallTimeout; the
// handler's ctx ends then too, with DeadlineExceeded, as if the caller's
// ctx had had that deadline (Orleans' CancelRequestOnTimeout). A handler
// waiting on ctx (an HTTP request, a downstream call) lets the grain go
// instead of holding it for a caller that is gone.
func TestHandlerCtxEndsAtTheDefaultCallTimeout(t *testing.T) {
	ended := make(chan error, 1)
	s := newSilo(t, silo.Config{CallTimeout: 20 * time.Millisecond}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "w", func(grain.ID) waitsForCtx { return waitsForCtx{ended: ended} }))
	})
	id := grain.NewID("w", "1")
	_, err := s.Ask(context.Background(), id, "wait")
	require.ErrorIs(t, err, grain.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a deadline, the silo's default")
	require.ErrorIs(t, <-ended, context.DeadlineExceeded)
	v, err := silo.Call[string](ctxT(t), s, id, "next")
	require.NoError(t, err)
	assert.Equal(t, "free", v)
}

// holdThenCall, a reentrant grain, holds its turn on "hold" until the gate
// opens and then calls the tally "x" — waiting in a call, when the grain
// lets other messages in; any other message it counts and answers.
type holdThenCall struct {
	handled *atomic.Int32
	gate    <-chan struct{}
	in      chan<- struct{}
}

func (g *holdThenCall) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "hold" {
		g.in <- struct{}{}
		<-g.gate
		_, err := silo.Call[string](ctx, c.Silo(), grain.NewID("tally", "x"), "called")
		return nil, err
	}
	g.handled.Add(1)
	return "ok", nil
}

// An ask whose caller gave up while it waited for a reentrant grain is not
// run when the grain lets it in either (its turn waiting in a call): it is
// a dead letter with reason expired, as on the grain's ordinary path.
func TestAnExpiredAskIsNotLetIntoAReentrantGrain(t *testing.T) {
	var acts, handled, rHandled atomic.Int32
	in, gate := make(chan struct{}), make(chan struct{})
	s := newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "tally", func(grain.ID) *tally { return &tally{acts: &acts, handled: &handled} }))
		require.NoError(t, silo.Register(s, "r", func(grain.ID) *holdThenCall {
			return &holdThenCall{handled: &rHandled, gate: gate, in: in}
		}, silo.WithReentrant()))
	})
	ctx := ctxT(t)
	dl := s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	r := grain.NewID("r", "1")
	require.NoError(t, s.Tell(ctx, r, "hold"))
	<-in // its turn holds the partition: the ask waits in the queue

	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err := s.Ask(short, r, "late")
	require.ErrorIs(t, err, grain.ErrTimeout)
	close(gate) // the turn calls out: the grain lets messages in while it waits

	select {
	case d := <-dl.C:
		assert.Equal(t, grain.ReasonExpired, d.Reason)
		assert.Equal(t, "late", d.Msg)
		assert.True(t, d.Ask)
	case <-ctx.Done():
		t.Fatal("no dead letter for the expired ask")
	}
	v, err := silo.Call[string](ctx, s, r, "after")
	require.NoError(t, err)
	assert.Equal(t, "ok", v)
	assert.Equal(t, int32(1), rHandled.Load(), "only the call after it ran")
	// The grain's call out was queued before the dead letter (the grain
	// waited in it): a call to its target now comes after it.
	_, err = silo.Call[string](ctx, s, grain.NewID("tally", "x"), "sync")
	require.NoError(t, err)
	assert.Equal(t, int32(2), handled.Load(), "the grain's own call out ran, then this one")
}
