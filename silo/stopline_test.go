package silo_test

import (
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// slowGoer's OnDeactivate waits outside the partition (silo.Await) until
// released: its end comes back to the owner as a message of the runtime's
// own, which the owner may read in the same round as a Stop.
type slowGoer struct {
	got     chan<- string
	hookIn  chan<- struct{}
	release <-chan struct{}
	inst    int
}

func (g *slowGoer) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	g.got <- msg.(string)
	return nil, nil
}

func (g *slowGoer) OnDeactivate(ctx context.Context, _ *grain.Context) error {
	if g.inst > 1 {
		return nil
	}
	return silo.Await(ctx, func() error {
		g.hookIn <- struct{}{}
		<-g.release
		return nil
	})
}

// ownerHolder holds its partition's owner in a turn until released: what is
// sent meanwhile waits in the partition's queue, to be read in one round.
type ownerHolder struct {
	in      chan<- struct{}
	release <-chan struct{}
}

func (g *ownerHolder) Receive(context.Context, *grain.Context, any) (any, error) {
	g.in <- struct{}{}
	<-g.release
	return nil, nil
}

// A message sent before a Stop is a dead letter, however the round that
// reads the Stop goes on: here the grain's deactivation hook ends in the
// same round, after the Stop and before the message, which then finds no
// activation. It was delivered to a fresh activation, as if sent after the
// Stop (the several-clients model test found it, once OnDeactivate sent
// messages of its own: "message 39, sent before the stop, handled by
// activation 3 with those sent after").
func TestAMessageSentBeforeAStopIsADeadLetterThoughTheGrainWentMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got, hookIn, hookRelease := make(chan string, 8), make(chan struct{}), make(chan struct{})
		held, holdRelease := make(chan struct{}), make(chan struct{})
		s, err := silo.New(silo.Config{
			Partitions:       1,         // the ownerHolder holds the grain's partition
			HandoffThreshold: time.Hour, // and is not handed off meanwhile
			Logger:           newTextLogger(io.Discard),
		})
		require.NoError(t, err)
		n := 0
		require.NoError(t, silo.Register(s, "g", func(grain.ID) *slowGoer {
			n++
			return &slowGoer{got: got, hookIn: hookIn, release: hookRelease, inst: n}
		}))
		require.NoError(t, silo.Register(s, "hold", func(grain.ID) *ownerHolder {
			return &ownerHolder{in: held, release: holdRelease}
		}))
		require.NoError(t, s.Start())
		defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
		dead := s.SubscribeDeadLetters(8)
		defer dead.Cancel()
		ctx := context.Background()
		id := grain.NewID("g", "k")

		require.NoError(t, s.Tell(ctx, id, "first"))
		require.Equal(t, "first", <-got)
		require.NoError(t, s.Deactivate(ctx, id))
		<-hookIn // the hook waits, off the partition
		require.NoError(t, s.Tell(ctx, grain.NewID("hold", "h"), "hold"))
		<-held // the owner is held: what follows waits in the queue
		require.NoError(t, s.Tell(ctx, id, "before"))
		require.NoError(t, s.Stop(ctx, id))
		close(hookRelease) // the hook's end queues behind the Stop
		synctest.Wait()
		close(holdRelease) // one round reads the Stop, the hook's end, "before"
		require.NoError(t, s.Tell(ctx, id, "after"))

		// Each message's outcome, in order: "before" a dead letter, then
		// "after" handled.
		var outcomes []string
		for len(outcomes) < 2 {
			select {
			case m := <-got:
				outcomes = append(outcomes, "handled "+m)
			case d := <-dead.C:
				outcomes = append(outcomes, "dead "+d.Msg.(string)+" ("+d.Reason.String()+")")
			}
		}
		require.Equal(t, []string{"dead before (stopped)", "handled after"}, outcomes)
		synctest.Wait()
		require.Empty(t, got)
	})
}
