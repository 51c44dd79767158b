package silo_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// hangingSave's OnDeactivate — a save to a store that hangs — ignores its
// ctx until release is closed, when it reports the ctx's cause; its
// other instances save at once.
type hangingSave struct {
	key     string
	release <-chan struct{}
	cause   chan<- error
	saved   chan<- string
}

func (g *hangingSave) OnDeactivate(ctx context.Context, _ *grain.Context) error {
	if g.key == "stuck" {
		<-g.release
		g.cause <- context.Cause(ctx)
		return nil
	}
	g.saved <- g.key
	return nil
}

func (*hangingSave) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }

// A Shutdown bounds each OnDeactivate by Config.DeactivationTimeout, as its
// doc says: one that hangs past it is given up on, and the Shutdown, with
// every grain gone, returns nil then — not waiting for the hook, which goes
// on alone. Before, the silo gave up on the hook and removed its grain,
// but the partition still counted the hook's turn among those it waited
// for, and the Shutdown held on until its ctx ended (here a minute, and
// then a DeadlineExceeded).
func TestAShutdownDoesNotWaitForAnOnDeactivateItGaveUpOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		cause, saved := make(chan error, 1), make(chan string, 4)
		s, err := silo.New(silo.Config{DeactivationTimeout: time.Second, Partitions: 1})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "saver", func(id grain.ID) *hangingSave {
			return &hangingSave{key: id.Key(), release: release, cause: cause, saved: saved}
		}))
		require.NoError(t, s.Start())
		ctx := t.Context()
		for _, key := range []string{"a", "stuck", "b"} {
			_, err := s.Ask(ctx, grain.NewID("saver", key), "hello")
			require.NoError(t, err)
		}

		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		require.NoError(t, s.Shutdown(sctx))
		took := time.Since(start) // the bubble's clock: exact
		assert.GreaterOrEqual(t, took, time.Second, "the hook had its bound")
		assert.Less(t, took, 2*time.Second, "and the Shutdown no more than that, and the give-up's threshold")
		assert.ElementsMatch(t, []string{"a", "b"}, []string{<-saved, <-saved}, "the other grains saved")

		close(release) // the hook the silo gave up on returns
		require.ErrorIs(t, <-cause, context.DeadlineExceeded, "its ctx ended at its bound")
	})
}
