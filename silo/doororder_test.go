package silo_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// seqNote is the n-th message a doorSender's turns sent.
type seqNote int

// doorHot notes the seqNotes it gets, in order; every turn takes workFor
// on the bubble's clock.
type doorHot struct {
	mu      *sync.Mutex
	got     *[]int
	workFor time.Duration
}

func (g *doorHot) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if n, ok := msg.(seqNote); ok {
		g.mu.Lock()
		*g.got = append(*g.got, int(n))
		g.mu.Unlock()
	}
	time.Sleep(g.workFor)
	return nil, nil
}

// doorSender is a reentrant grain whose every turn asks the hot grain a
// seqNote numbered in the order its turns send them.
type doorSender struct {
	mu   *sync.Mutex
	next int
	errs *[]error
}

func (g *doorSender) Receive(ctx context.Context, c *grain.Context, _ any) (any, error) {
	g.next++ // under the turn token: its turns number their sends in the order they make them
	_, err := c.Silo().Ask(ctx, grain.NewID("doorhot", "hot"), seqNote(g.next))
	if err != nil {
		g.mu.Lock()
		*g.errs = append(*g.errs, err)
		g.mu.Unlock()
	}
	return nil, nil
}

// A reentrant grain's asks that wait at a held grain's door reach it in
// the order its turns sent them. An ask gave the grain's turn token up as
// it began to wait at the door, so a turn let in then sent too; and once
// the door let the first in, the second could pass the door before the
// first had queued its message: the grain's own sends out of order (the
// several-clients model test, TestSeveralClientsAtOnceKeepEveryPromise:
// "g:d>c: message 1 handled after 2"). The ask keeps the token through
// the door now, as a tell did and as a wait for room in a partition queue
// does.
func TestAReentrantGrainsAsksThroughAHeldDoorKeepTheirOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []int
		var errs []error
		s, err := silo.New(silo.Config{Partitions: 1, QueueCapacity: 64})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "doorhot", func(grain.ID) *doorHot {
			return &doorHot{mu: &mu, got: &got, workFor: time.Millisecond}
		}, silo.WithMaxBacklog(8, silo.RejectNewest)))
		require.NoError(t, silo.Register(s, "doorsender", func(grain.ID) *doorSender {
			return &doorSender{mu: &mu, errs: &errs}
		}, silo.WithReentrant()))
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		hot := grain.NewID("doorhot", "hot")
		flooded := make(chan struct{})
		go func() { // a flood that keeps the hot grain's door held
			defer close(flooded)
			for i := 0; i < 3000; i++ {
				_ = s.Tell(ctx, hot, i)
			}
		}()
		for s.Stats().BacklogHolds == 0 {
			time.Sleep(time.Millisecond) // the bubble's clock: the hot grain works meanwhile
		}
		const sends = 200
		for range sends {
			require.NoError(t, s.Tell(ctx, grain.NewID("doorsender", "r"), "send"))
		}
		<-flooded
		_, err = s.Ask(ctx, grain.NewID("doorsender", "r"), "send") // behind the others' turns
		require.NoError(t, err)
		_, err = s.Ask(ctx, hot, "last") // behind every seqNote
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, errs)
		require.Len(t, got, sends+1)
		for i := 1; i < len(got); i++ {
			if got[i] < got[i-1] {
				t.Errorf("note %d handled after note %d", got[i], got[i-1])
			}
		}
	})
}

// cycleHot is a flooded grain whose "callR" turn calls the reentrant
// grain that its door holds an ask of.
type cycleHot struct{ workFor time.Duration }

func (g *cycleHot) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "callR" {
		return c.Silo().Ask(ctx, grain.NewID("cyclesender", "r"), "ping")
	}
	time.Sleep(g.workFor)
	return nil, nil
}

// cycleSender is a reentrant grain whose "askG" turn asks the flooded
// grain, and whose "ping" turn answers.
type cycleSender struct{}

func (cycleSender) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "askG" {
		return c.Silo().Ask(ctx, grain.NewID("cyclehot", "hot"), "work")
	}
	return "pong", nil
}

// The cycle the hand-on of the token at a door was for: a reentrant
// grain's ask waits at a flooded grain's held door, holding its grain's
// turn token, while a turn of the flooded grain calls the reentrant grain
// — whose turn let in for it needs that token. It does not stall: the
// flooded grain's turn, waiting in its call, is off its partition, and a
// held grain whose turn is off its partition opens its door
// (partition.holding), so the ask goes in — or, the flood having filled
// the backlog again while the turn was away, is refused by its policy —
// gives the token up, and the call back is answered. (Whether the ask is
// at the door as the turn calls is the scheduler's: in about half the
// runs here it is.)
func TestAHeldDoorOpensForTheAskOfAGrainItsTurnCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := silo.New(silo.Config{Partitions: 1, QueueCapacity: 64})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "cyclehot", func(grain.ID) *cycleHot {
			return &cycleHot{workFor: time.Millisecond}
		}, silo.WithMaxBacklog(8, silo.RejectNewest)))
		require.NoError(t, silo.Register(s, "cyclesender", func(grain.ID) cycleSender { return cycleSender{} }, silo.WithReentrant()))
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		hot := grain.NewID("cyclehot", "hot")
		stop := make(chan struct{})
		flooded := make(chan struct{})
		go func() { // a flood that keeps the hot grain's door held
			defer close(flooded)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if errors.Is(s.Tell(ctx, hot, i), silo.ErrSiloClosed) {
					return // the test failed, and closed the silo
				}
			}
		}()
		for s.Stats().BacklogHolds == 0 {
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, s.Tell(ctx, hot, "callR")) // in its backlog, behind the flood
		asked := make(chan error, 1)
		go func() {
			_, err := s.Ask(ctx, grain.NewID("cyclesender", "r"), "askG") // waits at the door
			asked <- err
		}()
		start := time.Now()
		if err := <-asked; err != nil {
			// Let in while the flooded grain's turn was off its partition,
			// the flood had refilled its backlog: refused by its policy.
			require.ErrorIs(t, err, grain.ErrOverloaded)
		}
		assert.Less(t, time.Since(start), time.Second, "the ask stalled")
		close(stop)
		<-flooded
	})
}
