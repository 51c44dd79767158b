package silo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// hookCaller is a reentrant stateless worker whose OnDeactivate calls its
// own identity — another activation must answer, this one being on its
// way out — and reports how the call ended.
type hookCaller struct {
	hooked chan<- error
}

type (
	hcBlock struct{ until <-chan struct{} } // waits in Await until until closes
	hcLeave struct{}                        // deactivates the activation after the turn
	hcPing  struct{}
)

func (g *hookCaller) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case hcBlock:
		return nil, silo.Await(ctx, func() error {
			select {
			case <-m.until:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	case hcLeave:
		gc.DeactivateOnIdle()
		return "leaving", nil
	case hcPing:
		return "pong", nil
	}
	return nil, errors.New("hookCaller: unknown message")
}

func (g *hookCaller) OnDeactivate(ctx context.Context, gc *grain.Context) error {
	_, err := silo.Call[string](ctx, gc.Silo(), gc.ID(), hcPing{})
	select {
	case g.hooked <- err:
	default:
	}
	return nil
}

// hookEnv is a two-partition silo of hookCallers (kind "hc", reentrant
// stateless), one identity's first activation waiting in Await until
// release closes: the next message makes a second activation, in the
// other partition.
type hookEnv struct {
	s       *silo.Silo
	id      grain.ID
	hooked  chan error   // each OnDeactivate's call to its identity, how it ended
	built   atomic.Int64 // instances the factory made
	release chan struct{}
	blocked chan error // the first activation's waiting turn, once released
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	e := &hookEnv{id: grain.NewID("hc", "w"), hooked: make(chan error, 4), release: make(chan struct{}), blocked: make(chan error, 1)}
	e.s = newSilo(t, silo.Config{Partitions: 2, DeactivationTimeout: time.Minute}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hc", func(grain.ID) *hookCaller { e.built.Add(1); return &hookCaller{hooked: e.hooked} },
			silo.WithStatelessWorker(0), silo.WithReentrant()))
	})
	ctx := ctxT(t)
	go func() {
		_, err := silo.Call[any](ctx, e.s, e.id, hcBlock{e.release})
		e.blocked <- err
	}()
	// Waiting in Await, off its partition (a handoff), the activation
	// counts as busy to the next sender.
	require.Eventually(t, func() bool { return e.s.Stats().Handoffs > 0 }, 10*time.Second, time.Millisecond)
	return e
}

// An OnDeactivate of a stateless activation that calls its own identity is
// answered by another activation — here the first, whose turn waits in
// Await and, the kind being reentrant, lets the call in — not queued
// behind the deactivation that waits for it until the hook's bound.
func TestAStatelessHookCallingItsIdentityIsAnsweredByAnotherActivation(t *testing.T) {
	e := newHookEnv(t)
	defer close(e.release)
	ctx := ctxT(t)
	v, err := silo.Call[string](ctx, e.s, e.id, hcLeave{})
	require.NoError(t, err)
	require.Equal(t, "leaving", v)
	require.EqualValues(t, 2, e.built.Load(), "a second activation took the message the first, in a turn, did not")
	select {
	case err := <-e.hooked:
		require.NoError(t, err, "the hook's call to its own identity")
	case <-ctx.Done():
		t.Fatal("the hook's call to its own identity was not answered")
	}
}

// When every activation of a reentrant stateless identity goes at once
// (Deactivate reaches them all) and each OnDeactivate calls the identity,
// no activation can answer until a hook ends, and no fresh one can be made
// beside a hook: the calls close a cycle, and one fails at once with
// ErrCallCycle — the hooks end, not wait for their bound.
func TestStatelessHooksCallingTheirIdentityAsAllGoDoNotWaitForTheirBound(t *testing.T) {
	e := newHookEnv(t)
	ctx := ctxT(t)
	_, err := silo.Call[string](ctx, e.s, e.id, hcPing{}) // the second activation
	require.NoError(t, err)
	require.EqualValues(t, 2, e.built.Load())
	require.NoError(t, e.s.Deactivate(ctx, e.id))
	close(e.release) // the first's turn ends: both go
	require.NoError(t, <-e.blocked)
	for range 2 {
		select {
		case err := <-e.hooked:
			if err != nil {
				require.ErrorIs(t, err, grain.ErrCallCycle)
			}
		case <-ctx.Done():
			t.Fatal("a hook's call to its own identity waited")
		}
	}
}

// A turn let into a reentrant stateless activation that waits on a grain
// is followed by a deadlock walk into its calls, as a reentrant grain's
// is: plain p's turn calls the worker, whose turn — let in — calls plain
// q, whose turn, on another chain, calls p. The call that closes the
// cycle fails at once with ErrCallCycle, and the rest complete. (A
// reentrant stateless activation's waits were no edges at all: the walk
// took the let-in turn for free, and the three waited for their
// deadlines.)
func TestACycleThroughATurnLetIntoAReentrantStatelessWorkerFailsFast(t *testing.T) {
	gate := make(chan struct{})
	pid, qid, wid := grain.NewID("p", "1"), grain.NewID("q", "1"), grain.NewID("w", "1")
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "p", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "go" {
					return gc.Silo().Ask(ctx, wid, "callQ")
				}
				return "p", nil
			}
		}))
		require.NoError(t, silo.Register(s, "q", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "callP" {
					<-gate
					return gc.Silo().Ask(ctx, pid, "ping")
				}
				return "q", nil
			}
		}))
		require.NoError(t, silo.Register(s, "w", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				if msg == "callQ" {
					return gc.Silo().Ask(ctx, qid, "hi")
				}
				return "w", nil
			}
		}, silo.WithStatelessWorker(0), silo.WithReentrant()))
	})
	ctx := ctxT(t)                    // bounds a failure: without a verdict all three wait for it
	_, err := s.Ask(ctx, wid, "ping") // activated before the cycle
	require.NoError(t, err)
	type outcome struct {
		who string
		err error
	}
	done := make(chan outcome, 2)
	go func() { _, err := s.Ask(ctx, qid, "callP"); done <- outcome{"q", err} }()
	require.Eventually(t, func() bool { return s.Stats().Handoffs > 0 }, 10*time.Second, time.Millisecond) // q's turn holds: handed off
	go func() { _, err := s.Ask(ctx, pid, "go"); done <- outcome{"p", err} }()
	// p waits on the worker, whose turn waits behind q's: then q calls p.
	require.Eventually(t, func() bool {
		for _, b := range s.Stats().Backlog {
			if b > 0 {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond)
	close(gate)
	cycles := 0
	for range 2 {
		select {
		case o := <-done:
			if o.err != nil {
				require.ErrorIs(t, o.err, grain.ErrCallCycle, o.who)
				cycles++
			}
		case <-ctx.Done():
			t.Fatal("the cycle through the worker's let-in turn waited for its deadline")
		}
	}
	require.Equal(t, 1, cycles, "one call closed the cycle")
}
