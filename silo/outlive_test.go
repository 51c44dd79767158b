package silo_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

type (
	callSlow struct{ gaveUp chan<- error }
	slowRead struct{ giveUp context.CancelFunc } // the caller's: it gives up once the handler has begun
	callEcho struct{}
	callHold struct{ started chan<- struct{} }
)

// An ask's handler can outlive the turn that called it: here each caller,
// in a tell's turn, gives up once its handler has begun, and the handlers
// go on reading their ctx — whose parents include the caller's turn ctx —
// while the callers' partitions run other turns, calls among them. A tell's
// turn ctx belongs to its worker; the worker of a turn whose call went
// unanswered is never reused (workerpool.go), so that ctx is never written
// again. Under -race this fails if it is: a first version of worker pooling
// did that, and a second one would have, which pooled every handed-off
// worker but an activation's. The callers are active first (else their
// calls come in activation turns), and many calls wait at once at the end,
// taking every worker their partition kept, the oldest included.
func TestAHandlerOutlivingItsCallerReadsAStableCtx(t *testing.T) {
	release, holdOn := make(chan struct{}), make(chan struct{})
	var readers sync.WaitGroup
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "caller", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				switch m := msg.(type) {
				case callSlow:
					cctx, cancel := context.WithCancel(ctx)
					defer cancel()
					_, err := gc.Silo().Ask(cctx, grain.NewID("slow", gc.ID().Key()), slowRead{giveUp: cancel})
					m.gaveUp <- err
				case callEcho: // a call: the partition is handed off, to a worker that may be one reused
					return silo.Call[string](ctx, gc.Silo(), grain.NewID("echo", gc.ID().Key()), "hi")
				case callHold: // a call that waits: many at once take every worker a partition kept
					return silo.Call[string](ctx, gc.Silo(), grain.NewID("hold", gc.ID().Key()), m.started)
				}
				return "ok", nil
			}
		}))
		require.NoError(t, silo.Register(s, "echo", func(grain.ID) grain.Func {
			return func(context.Context, *grain.Context, any) (any, error) { return "hi", nil }
		}))
		require.NoError(t, silo.Register(s, "hold", func(grain.ID) grain.Func {
			return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
				msg.(chan<- struct{}) <- struct{}{}
				<-holdOn
				return "held", nil
			}
		}))
		require.NoError(t, silo.Register(s, "slow", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				readers.Add(1)
				go func() { // reads its ctx after its caller gave up, as a handler may
					defer readers.Done()
					for {
						_ = context.Cause(ctx)
						_ = ctx.Value(traceKey{}) // up through the caller's turn ctx
						select {
						case <-release:
							return
						default:
							runtime.Gosched()
						}
					}
				}()
				msg.(slowRead).giveUp()
				<-release
				return nil, nil
			}
		}))
	})
	ctx := ctxT(t)
	const callers = 16
	gaveUp := make(chan error, callers)
	for i := range callers {
		// Active first: the worker of an activation's turn is never reused
		// (acttimeout.go watches it), so the call must come in a later turn.
		_, err := s.Ask(ctx, grain.NewIntID("caller", int64(i)), "ping")
		require.NoError(t, err)
		require.NoError(t, s.Tell(ctx, grain.NewIntID("caller", int64(i)), callSlow{gaveUp}))
	}
	for range callers {
		require.ErrorIs(t, <-gaveUp, context.Canceled)
	}
	for range 30 {
		for i := range callers {
			require.NoError(t, s.Tell(ctx, grain.NewIntID("caller", int64(i)), callEcho{}))
		}
		for i := range callers { // a barrier, and more turns
			_, err := s.Ask(ctx, grain.NewIntID("caller", int64(i)), "ping")
			require.NoError(t, err)
		}
	}
	// Then many calls wait at once, each turn handing its partition off:
	// the workers a partition kept are all taken, the oldest included.
	const holders = 64
	started := make(chan struct{}, holders)
	for i := range holders {
		require.NoError(t, s.Tell(ctx, grain.NewIntID("caller", int64(100+i)), callHold{started}))
	}
	for range holders {
		<-started
	}
	close(holdOn)
	for i := range holders { // a barrier: every holder's turn is over
		_, err := s.Ask(ctx, grain.NewIntID("caller", int64(100+i)), "ping")
		require.NoError(t, err)
	}
	close(release)
	readers.Wait()
}
