package silo_test

import (
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A crowd of grains backing off at once arms one clock timer a partition,
// not one a grain: their backoffs wait in the partition's timer heap
// beside its grains' timers (partition.backOff). A clock timer each was a
// runtime timer and a closure while it waited, and, with the real clock,
// a goroutine as it fired — 50,000 grains restarting together made
// 50,000, whose structs the runtime keeps. Each grain still restarts once
// its own backoff has passed, and its message waiting meanwhile is
// answered by the fresh instance.
func TestACrowdOfBackoffsArmsOneClockTimerAPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := new(jumpClock)
		const partitions, n = 2, 1000
		s := newSilo(t, silo.Config{Clock: clk, Partitions: partitions, IdleTimeout: -1, Logger: newTextLogger(io.Discard)}, func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "boomer", func(grain.ID) *boomer { return &boomer{} }, silo.WithSupervision(hourBackoff)))
		})
		ctx := context.Background()
		synctest.Wait()
		before := clk.armed.Load()
		for i := range n {
			id := grain.NewIntID("boomer", int64(i))
			for range 2 { // restarted at once, then backing off an hour
				require.NoError(t, s.Tell(ctx, id, "boom"))
			}
		}
		synctest.Wait()
		armed := clk.armed.Load() - before
		assert.Positive(t, armed, "no clock timer for the backoffs")
		assert.LessOrEqual(t, armed, int64(partitions), "clock timers armed for %d grains backing off", n)

		answers := make(chan error, n)
		patient, cancel := context.WithTimeout(ctx, 2*time.Hour) // past the default call timeout
		defer cancel()
		for i := range n {
			go func() {
				_, err := s.Ask(patient, grain.NewIntID("boomer", int64(i)), "hello")
				answers <- err
			}()
		}
		synctest.Wait()
		require.Empty(t, answers, "answered while backing off")
		time.Sleep(time.Hour)
		for range n {
			require.NoError(t, <-answers)
		}
		synctest.Wait()
		assert.LessOrEqual(t, clk.armed.Load(), before, "a clock timer left armed once every backoff passed")
	})
}
