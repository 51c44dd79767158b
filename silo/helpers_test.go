package silo_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Messages of the test grains.
type (
	incr    struct{ n int }
	get     struct{}
	boom    struct{ v any }
	fail    struct{ err error }
	echo    struct{ v any }
	block   struct{ until <-chan struct{} }
	waitCtx struct{ started chan<- struct{} }
	hold    struct{ until <-chan struct{} } // like block, but deaf to ctx
)

// counter is the test grain: a plain int, and messages that misbehave.
type counter struct {
	n int
}

func (c *counter) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case incr:
		c.n += m.n
		return c.n, nil
	case get:
		return c.n, nil
	case boom:
		panic(m.v)
	case fail:
		return nil, m.err
	case echo:
		return m.v, nil
	case block:
		select { // honour ctx, so a failed test can still Close the silo
		case <-m.until:
		case <-ctx.Done():
		}
		return nil, nil
	case hold:
		<-m.until
		return nil, nil
	case waitCtx:
		close(m.started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("counter: unknown message %T", msg)
}

func newSilo(t *testing.T, cfg silo.Config, reg func(s *silo.Silo)) *silo.Silo {
	t.Helper()
	s, err := silo.New(cfg)
	require.NoError(t, err)
	if reg == nil {
		reg = func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
		}
	}
	reg(s)
	require.NoError(t, s.Start())
	t.Cleanup(func() { s.Close() })
	return s
}

// ctxT is a test's ctx: a guard against a hang, not a bound on how long
// anything should take. A CI run tests every package at once under -race
// on two cores, where tests of 7 s alone took 18 s and more.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitBacklog waits until n messages wait in grain mailboxes: they reached
// their grain, behind a turn that has not finished.
func waitBacklog(t *testing.T, s *silo.Silo, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		total := 0
		for _, b := range s.Stats().Backlog {
			total += b
		}
		return total == n
	}, 10*time.Second, 100*time.Microsecond, "waiting for a backlog of %d", n)
}

// runtimeYield lets other goroutines run between clock steps.
func runtimeYield() { runtime.Gosched() }

// turnGuard is an in-turn flag: a turn that finds it set counts an overlap,
// which the one-turn-at-a-time rule forbids.
type turnGuard struct {
	in       atomic.Bool
	overlaps *atomic.Int64
}

func (g *turnGuard) enter() {
	if !g.in.CompareAndSwap(false, true) {
		g.overlaps.Add(1)
	}
}

func (g *turnGuard) leave() { g.in.Store(false) }

// busyWork spins for d: the work of a slow turn (not a synchronisation).
func busyWork(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
