package silo_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

var errFlaky = errors.New("flaky: failed")

// awaitMsg has a flaky grain say it started, then wait for gate at an
// await point (where a reentrant grain lets others in).
type awaitMsg struct{ started, gate chan struct{} }

// flaky fails "fail", waits on an awaitMsg, and answers anything else.
func flaky(_ grain.ID) grain.Func {
	return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
		switch m := msg.(type) {
		case awaitMsg:
			close(m.started)
			return nil, silo.Await(ctx, func() error { <-m.gate; return nil })
		case string:
			if m == "fail" {
				return nil, errFlaky
			}
		}
		return "ok", nil
	}
}

// The Decider is the program's code, and runs in the failed turn: one that
// blocks — on a channel, or calling a grain to report the failure — is
// handed off as a blocking handler is, and the other grains of its
// partition go on. It ran on the partition's owner, which it stalled: every
// grain of the partition waited, and a call to one of them waited for its
// deadline (30 s by default), the owner being the one to run it.
func TestABlockingDeciderHoldsUpNoOtherGrain(t *testing.T) {
	t.Run("waiting on a channel", func(t *testing.T) {
		entered, gate := make(chan struct{}), make(chan struct{})
		decider := activation.DeciderFunc(func(_ grain.ID, err error) activation.Directive {
			close(entered)
			<-gate
			return activation.Resume
		})
		s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "flaky", flaky, silo.WithSupervision(activation.Supervision{Decider: decider})))
		})
		release := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(release) // before the silo's Close: a failing test does not hang on the Decider
		ctx := ctxT(t)
		failed := make(chan error, 1)
		go func() { _, err := s.Ask(ctx, grain.NewID("flaky", "a"), "fail"); failed <- err }()
		<-entered

		octx, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds a failing test
		defer cancel()
		v, err := silo.Call[string](octx, s, grain.NewID("flaky", "b"), "hello")
		require.NoError(t, err, "another grain of the partition answers while the Decider blocks")
		assert.Equal(t, "ok", v)

		release()
		require.ErrorIs(t, <-failed, errFlaky)
		v, err = silo.Call[string](ctx, s, grain.NewID("flaky", "a"), "hello")
		require.NoError(t, err)
		assert.Equal(t, "ok", v, "resumed")
	})

	t.Run("calling a grain", func(t *testing.T) {
		var reported atomic.Int32
		var s *silo.Silo
		decider := activation.DeciderFunc(func(id grain.ID, err error) activation.Directive {
			// A Decider has no ctx of a turn: its call is one from outside.
			if _, cerr := s.Ask(context.Background(), grain.NewID("reporter", "r"), id); cerr == nil {
				reported.Add(1)
			}
			return activation.Resume
		})
		s = newSilo(t, silo.Config{Partitions: 1, CallTimeout: 10 * time.Second}, func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "flaky", flaky, silo.WithSupervision(activation.Supervision{Decider: decider})))
			require.NoError(t, silo.Register(s, "reporter", func(grain.ID) grain.Func {
				return func(context.Context, *grain.Context, any) (any, error) { return nil, nil }
			}))
		})
		ctx := ctxT(t)
		start := time.Now()
		_, err := s.Ask(ctx, grain.NewID("flaky", "a"), "fail")
		require.ErrorIs(t, err, errFlaky)
		assert.Equal(t, int32(1), reported.Load())
		assert.Less(t, time.Since(start), 5*time.Second, "the report did not wait for its call's deadline")
	})
}

// A Decider that calls runtime.Goexit in an interleaved turn's failure (a
// reentrant grain's, while another of its turns waits) gets the default
// directive, as in any turn: the caller has its error, and the grain goes on.
func TestADeciderCallingGoexitInAnInterleavedTurn(t *testing.T) {
	var logs syncBuffer
	exits := activation.DeciderFunc(func(grain.ID, error) activation.Directive {
		runtime.Goexit()
		return activation.Stop
	})
	s := newSilo(t, silo.Config{Logger: newTextLogger(&logs)}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flaky", flaky, silo.WithReentrant(),
			silo.WithSupervision(activation.Supervision{Decider: exits})))
	})
	ctx := ctxT(t)
	id := grain.NewID("flaky", "a")
	m := awaitMsg{started: make(chan struct{}), gate: make(chan struct{})}
	waited := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, m); waited <- err }()
	<-m.started // the grain's turn waits: the next message interleaves

	_, err := s.Ask(ctx, id, "fail")
	require.ErrorIs(t, err, errFlaky)
	v, err := silo.Call[string](ctx, s, id, "hello")
	require.NoError(t, err, "the default directive resumes a grain whose turn returned an error")
	assert.Equal(t, "ok", v)
	close(m.gate)
	require.NoError(t, <-waited)
	s.WaitLogged()
	assert.Contains(t, logs.String(), "Decider called runtime.Goexit")
}
