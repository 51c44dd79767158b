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

// An OnDeactivate of a stateless activation that calls its own identity is
// answered by another activation — here the first, whose turn waits in
// Await and, the kind being reentrant, lets the call in — not queued
// behind the deactivation that waits for it until the hook's bound.
func TestAStatelessHookCallingItsIdentityIsAnsweredByAnotherActivation(t *testing.T) {
	hooked := make(chan error, 4)
	var built atomic.Int64
	s := newSilo(t, silo.Config{Partitions: 2, DeactivationTimeout: time.Minute}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hc", func(grain.ID) *hookCaller { built.Add(1); return &hookCaller{hooked: hooked} },
			silo.WithStatelessWorker(0), silo.WithReentrant()))
	})
	ctx := ctxT(t)
	id := grain.NewID("hc", "w")
	release := make(chan struct{})
	defer close(release)
	blocked := make(chan error, 1)
	go func() {
		_, err := silo.Call[any](ctx, s, id, hcBlock{release})
		blocked <- err
	}()
	// The first activation waits in Await, off its partition: the next
	// message makes a second activation in the other partition.
	require.Eventually(t, func() bool { return s.Stats().Handoffs > 0 }, 10*time.Second, time.Millisecond)
	v, err := silo.Call[string](ctx, s, id, hcLeave{})
	require.NoError(t, err)
	require.Equal(t, "leaving", v)
	require.EqualValues(t, 2, built.Load(), "a second activation took the message the first, in a turn, did not")
	select {
	case err := <-hooked:
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
	hooked := make(chan error, 4)
	var built atomic.Int64
	s := newSilo(t, silo.Config{Partitions: 2, DeactivationTimeout: time.Minute}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hc", func(grain.ID) *hookCaller { built.Add(1); return &hookCaller{hooked: hooked} },
			silo.WithStatelessWorker(0), silo.WithReentrant()))
	})
	ctx := ctxT(t)
	id := grain.NewID("hc", "w")
	release := make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		_, err := silo.Call[any](ctx, s, id, hcBlock{release})
		blocked <- err
	}()
	require.Eventually(t, func() bool { return s.Stats().Handoffs > 0 }, 10*time.Second, time.Millisecond)
	_, err := silo.Call[string](ctx, s, id, hcPing{}) // the second activation
	require.NoError(t, err)
	require.EqualValues(t, 2, built.Load())
	require.NoError(t, s.Deactivate(ctx, id))
	close(release) // the first's turn ends: both go
	require.NoError(t, <-blocked)
	for range 2 {
		select {
		case err := <-hooked:
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
