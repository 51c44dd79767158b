package silo_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

type from struct{ id grain.ID }

type tellFan struct{ n int }

// Grains of one partition take turns sending, many more of them than the
// partition remembers senders for, and one fans its sends out to
// goroutines: every message names the grain that sent it.
func TestEveryMessageNamesItsSender(t *testing.T) {
	const talkers, rounds, fan = 500, 4, 50
	var got, wrong atomic.Int64
	done := make(chan struct{})
	want := int64(talkers*rounds + fan)
	rec := grain.NewID("recorder", "r")
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "recorder", func(grain.ID) grain.Func {
			return func(_ context.Context, c *grain.Context, msg any) (any, error) {
				sender, ok := c.Sender()
				if m := msg.(*from); !ok || sender != m.id {
					wrong.Add(1)
					t.Errorf("message from %v names %v (%v)", m.id, sender, ok)
				}
				if got.Add(1) == want {
					close(done)
				}
				return nil, nil
			}
		}))
		require.NoError(t, silo.Register(s, "talker", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				me := c.ID()
				f, ok := msg.(tellFan)
				if !ok {
					return nil, c.Silo().Tell(ctx, rec, &from{me})
				}
				var wg sync.WaitGroup
				errs := make(chan error, f.n)
				for range f.n {
					wg.Go(func() { errs <- c.Silo().Tell(ctx, rec, &from{me}) })
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						return nil, err
					}
				}
				return nil, nil
			}
		}))
	})
	ctx := ctxT(t)
	for r := range rounds {
		for i := range talkers {
			require.NoError(t, s.Tell(ctx, grain.NewID("talker", fmt.Sprint((i*7+r)%talkers)), "go"))
		}
	}
	_, err := s.Ask(ctx, grain.NewID("talker", "fan"), tellFan{fan})
	require.NoError(t, err)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%d of %d messages arrived", got.Load(), want)
	}
	require.Zero(t, wrong.Load())
}
