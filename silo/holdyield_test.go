package silo_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

// A turn that calls a grain of another partition yields while it holds
// its own (worker.holdYield). A wait for a core there that outlasts the
// handoff monitor's two looks hands the partition off — its other grains
// must not wait on the yield — but it is no slow turn of the grain's,
// whose code did nothing slow: none is counted, none logged.
func TestAYieldHoldingThePartitionIsNoSlowTurn(t *testing.T) {
	var slowLines atomic.Int64
	logger := slog.New(handlerFunc(func(r slog.Record) {
		if r.Message == "granary: slow turn held its partition" {
			slowLines.Add(1)
		}
	}))
	pt, err := queues.NewPartitioner(2)
	require.NoError(t, err)
	on := func(kind string, part int) grain.ID {
		for k := int64(0); ; k++ {
			if id := grain.NewIntID(kind, k); pt.Partition(id) == part {
				return id
			}
		}
	}
	relay, callee, neighbour := on("relay", 0), on("callee", 1), on("neighbour", 0)
	// The relay's yield holds its partition until the test lets it go: as
	// a yield behind a crowd of goroutines would, only longer.
	inYield, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	holdYield := func() {
		once.Do(func() {
			close(inYield)
			<-release
		})
	}
	s := newSilo(t, silo.Config{Partitions: 2, HandoffThreshold: 2 * time.Millisecond, Logger: logger},
		func(s *silo.Silo) {
			s.InHoldYield(holdYield)
			answer := func(grain.ID) grain.Func {
				return func(context.Context, *grain.Context, any) (any, error) { return 1, nil }
			}
			require.NoError(t, silo.Register(s, "callee", answer))
			require.NoError(t, silo.Register(s, "neighbour", answer))
			require.NoError(t, silo.Register(s, "relay", func(grain.ID) grain.Func {
				return func(ctx context.Context, gc *grain.Context, _ any) (any, error) {
					return silo.Call[int](ctx, gc.Silo(), callee, "hello")
				}
			}))
		})
	ctx := ctxT(t)
	for _, id := range []grain.ID{callee, neighbour} { // active, so their first calls make no turns of their own
		_, err := silo.Call[int](ctx, s, id, "hello")
		require.NoError(t, err)
	}

	handoffs := s.Stats().Handoffs
	relayed := make(chan error, 1)
	go func() {
		_, err := silo.Call[int](ctx, s, relay, "hello")
		relayed <- err
	}()
	<-inYield
	// The neighbour shares the held partition: its call is answered once
	// the monitor has handed the partition off from the yielding turn.
	_, err = silo.Call[int](ctx, s, neighbour, "hello")
	require.NoError(t, err)
	require.Greater(t, s.Stats().Handoffs, handoffs, "the held partition was handed off")
	close(release)
	require.NoError(t, <-relayed)

	s.WaitLogged()
	require.Zero(t, s.Stats().SlowTurns, "a yield that held the partition is counted as a slow turn")
	require.Zero(t, slowLines.Load(), "a yield that held the partition is logged as a slow turn")
}
