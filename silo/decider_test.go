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

// flaky fails "fail", ends its goroutine on "exit", waits on an awaitMsg,
// and answers anything else.
func flaky(_ grain.ID) grain.Func {
	return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
		switch m := msg.(type) {
		case awaitMsg:
			close(m.started)
			return nil, silo.Await(ctx, func() error { <-m.gate; return nil })
		case string:
			switch m {
			case "fail":
				return nil, errFlaky
			case "exit": // a require failing in a handler under test
				runtime.Goexit()
			}
		}
		return "ok", nil
	}
}

// flakySilo is a silo of flaky grains with the Decider d, reentrant if
// interleaved, on one partition.
func flakySilo(t *testing.T, cfg silo.Config, d activation.Decider, interleaved bool) *silo.Silo {
	opts := []silo.KindOption{silo.WithSupervision(activation.Supervision{Decider: d})}
	if interleaved {
		opts = append(opts, silo.WithReentrant())
	}
	cfg.Partitions = 1
	return newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flaky", flaky, opts...))
	})
}

// holdATurn starts a turn of id that waits at an await point, where a
// reentrant grain lets the next message interleave, and returns what lets
// it finish and checks it did.
func holdATurn(t *testing.T, ctx context.Context, s *silo.Silo, id grain.ID) (finish func()) {
	m := awaitMsg{started: make(chan struct{}), gate: make(chan struct{})}
	waited := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, m); waited <- err }()
	<-m.started
	return func() {
		close(m.gate)
		require.NoError(t, <-waited)
	}
}

// The Decider is the program's code, and runs in the failed turn: one that
// blocks — on a channel, or calling a grain to report the failure — is
// handed off as a blocking handler is, and the other grains of its
// partition go on. It ran on the partition's owner, which it stalled: every
// grain of the partition waited, and a call to one of them waited for its
// deadline (30 s by default), the owner being the one to run it.
func TestABlockingDeciderHoldsUpNoOtherGrain(t *testing.T) {
	// Waiting on a channel, about a turn that failed; and about a turn cut
	// short by its own runtime.Goexit, asked on its goroutine too (goexit.go:
	// decideGoexited), in an ordinary turn and in an interleaved one.
	for _, tc := range []struct {
		name        string
		msg         string
		want        error
		interleaved bool
	}{
		{"waiting on a channel", "fail", errFlaky, false},
		{"after a handler's Goexit", "exit", silo.ErrGoexit, false},
		{"after an interleaved handler's Goexit", "exit", silo.ErrGoexit, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered, gate := make(chan struct{}), make(chan struct{})
			decider := activation.DeciderFunc(func(_ grain.ID, err error) activation.Directive {
				close(entered)
				<-gate
				return activation.Resume
			})
			s := flakySilo(t, silo.Config{}, decider, tc.interleaved)
			release := sync.OnceFunc(func() { close(gate) })
			t.Cleanup(release) // before the silo's Close: a failing test does not hang on the Decider
			ctx := ctxT(t)
			id := grain.NewID("flaky", "a")
			held := func() {}
			if tc.interleaved {
				held = holdATurn(t, ctx, s, id) // the next message interleaves
			}
			failed := make(chan error, 1)
			go func() { _, err := s.Ask(ctx, id, tc.msg); failed <- err }()
			<-entered

			octx, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds a failing test
			defer cancel()
			v, err := silo.Call[string](octx, s, grain.NewID("flaky", "b"), "hello")
			require.NoError(t, err, "another grain of the partition answers while the Decider blocks")
			assert.Equal(t, "ok", v)

			release()
			require.ErrorIs(t, <-failed, tc.want)
			held()
			v, err = silo.Call[string](ctx, s, id, "hello")
			require.NoError(t, err)
			assert.Equal(t, "ok", v, "resumed")
		})
	}

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

// A Decider that calls runtime.Goexit gets the default directive, as in
// any turn: about an interleaved turn's failure (a reentrant grain's, while
// another of its turns waits), and about a turn that a Goexit of its own cut
// short — both goroutine exits on one turn — ordinary or interleaved. The
// caller has its error, nothing hangs, and the grain goes on (resumed after
// an error, restarted after a Goexit: the turn failed as a panic).
func TestADeciderCallingGoexitInATurn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		msg         string
		want        error
		interleaved bool
	}{
		{"an interleaved turn's error", "fail", errFlaky, true},
		{"a handler's Goexit", "exit", silo.ErrGoexit, false},
		{"an interleaved handler's Goexit", "exit", silo.ErrGoexit, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			exits := activation.DeciderFunc(func(grain.ID, error) activation.Directive {
				runtime.Goexit()
				return activation.Stop
			})
			s := flakySilo(t, silo.Config{Logger: newTextLogger(&logs)}, exits, tc.interleaved)
			ctx := ctxT(t)
			id := grain.NewID("flaky", "a")
			held := func() {}
			if tc.interleaved {
				held = holdATurn(t, ctx, s, id) // the next message interleaves
			}
			_, err := s.Ask(ctx, id, tc.msg)
			require.ErrorIs(t, err, tc.want)
			v, err := silo.Call[string](ctx, s, id, "hello")
			require.NoError(t, err, "not stopped: the default directive applies")
			assert.Equal(t, "ok", v)
			held()
			s.WaitLogged()
			assert.Contains(t, logs.String(), "Decider called runtime.Goexit")
		})
	}
}

// A Decider that stops the silo on a failure (fail-stop) starts Shutdown on
// a goroutine of its own, as activation.Decider's doc says: the failed
// turn's caller has its error, and the silo shuts down. (Called in the
// Decider, with a ctx that never ends, Shutdown would wait for ever for the
// turn the Decider runs in.)
func TestADeciderCanShutTheSiloDown(t *testing.T) {
	var s *silo.Silo
	shut := make(chan error, 1)
	ctx := ctxT(t)
	failStop := activation.DeciderFunc(func(grain.ID, error) activation.Directive {
		go func() { shut <- s.Shutdown(ctx) }()
		return activation.Stop
	})
	s = newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flaky", flaky, silo.WithSupervision(activation.Supervision{Decider: failStop})))
	})
	_, err := s.Ask(ctx, grain.NewID("flaky", "a"), "fail")
	require.ErrorIs(t, err, errFlaky)
	require.NoError(t, <-shut)
	<-s.Done()
	_, err = s.Ask(ctx, grain.NewID("flaky", "b"), "hello")
	require.ErrorIs(t, err, silo.ErrSiloClosed)
}
