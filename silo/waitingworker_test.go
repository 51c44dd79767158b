package silo_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// gateWorker stands for a grain whose turns wait on something outside the
// silo — an HTTP request, a database — in silo.Await: each turn counts
// itself in and waits for the gate, which opens once all expected turns
// are waiting at once.
type gateWorker struct {
	in     *atomic.Int64
	expect int64
	gate   chan struct{}
}

func (g *gateWorker) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	err := silo.Await(ctx, func() error {
		if g.in.Add(1) == g.expect {
			close(g.gate)
		}
		select {
		case <-g.gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return msg, err
}

// A kind whose turns wait — on I/O, on other grains — serves many callers
// at once when it is reentrant and waits in Await, however few partitions
// the silo has: sixteen turns of one identity wait together on two
// partitions, plain or stateless (whose activations are capped at the
// partitions), where a stateless worker alone could run two.
func TestAReentrantKindWaitingInAwaitServesManyAtOnce(t *testing.T) {
	for name, opts := range map[string][]silo.KindOption{
		"reentrant":           {silo.WithReentrant()},
		"reentrant stateless": {silo.WithReentrant(), silo.WithStatelessWorker(16)},
	} {
		t.Run(name, func(t *testing.T) {
			const n = 16
			var in atomic.Int64
			gate := make(chan struct{})
			s := newSilo(t, silo.Config{Partitions: 2, Logger: newTextLogger(&syncBuffer{})}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "fetch", func(grain.ID) *gateWorker {
					return &gateWorker{in: &in, expect: n, gate: gate}
				}, opts...))
			})
			ctx := ctxT(t) // bounds a failure: the gate never opens unless all wait at once
			id := grain.NewID("fetch", "api")
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					var v int
					v, errs[i] = silo.Call[int](ctx, s, id, i)
					if errs[i] == nil && v != i {
						errs[i] = fmt.Errorf("call %d answered %d", i, v)
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			assert.EqualValues(t, n, in.Load())
			assert.LessOrEqual(t, s.Stats().Activations["fetch"], 2)
		})
	}
}

// Register says, once, when a stateless kind asks for more activations an
// identity than the silo has partitions: an Orleans [StatelessWorker(100)]
// gets its hundred, and a program written for a larger machine should not
// run with two unaware. It names the kind, what it asked for and what it
// got, and what to do for turns that wait. A kind within the cap, or of one
// per partition (0), says nothing.
func TestAStatelessKindCappedAtThePartitionsSaysSo(t *testing.T) {
	var logs syncBuffer
	s, err := silo.New(silo.Config{Partitions: 3, Logger: newTextLogger(&logs)})
	require.NoError(t, err)
	pricer := func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) { return nil, nil }
	}
	require.NoError(t, silo.Register(s, "wide", pricer, silo.WithStatelessWorker(100)))
	require.NoError(t, silo.Register(s, "fits", pricer, silo.WithStatelessWorker(3)))
	require.NoError(t, silo.Register(s, "each", pricer, silo.WithStatelessWorker(0)))
	require.NoError(t, silo.Register(s, "plain", pricer))
	require.ErrorIs(t, silo.Register(s, "bad", pricer, silo.WithStatelessWorker(100), silo.WithCallTimeout(-1)), grain.ErrInvalidConfig)
	require.NoError(t, s.Start())
	require.NoError(t, s.Shutdown(ctxT(t))) // the log's lines are written by the time it returns

	var capped []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "capped") {
			capped = append(capped, line)
		}
	}
	require.Len(t, capped, 1, "one line, for the kind registered capped: %q", logs.String())
	line := capped[0]
	assert.Contains(t, line, "level=INFO")
	assert.Contains(t, line, "kind=wide asked=100 partitions=3")
	assert.Contains(t, line, "WithReentrant")
	assert.Contains(t, line, "silo.Await")
}
