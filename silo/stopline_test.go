package silo_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
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
	if msg == "boom" {
		panic("boom")
	}
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
		e := newStopLine(t, silo.Config{})
		require.NoError(t, e.s.Tell(e.ctx, e.id, "first"))
		require.Equal(t, "first", <-e.got)
		require.NoError(t, e.s.Deactivate(e.ctx, e.id))
		<-e.hookIn // the hook waits, off the partition
		e.hold(t)  // what follows waits in the queue
		require.NoError(t, e.s.Tell(e.ctx, e.id, "before"))
		require.NoError(t, e.s.Stop(e.ctx, e.id))
		close(e.hookRelease) // the hook's end queues behind the Stop
		synctest.Wait()
		close(e.holdRelease) // one round reads the Stop, the hook's end, "before"
		require.NoError(t, e.s.Tell(e.ctx, e.id, "after"))
		e.outcomes(t, "dead before (stopped)", "handled after")
	})
}

// A Stop that comes while a grain its supervision stopped is still
// going — its OnDeactivate running on after its quarantine — draws its
// line too: a message sent before it, delivered once the quarantine is
// over, is a dead letter, not the fresh instance's. The Stop was taken for
// one with nothing to do ("everything until it is gone is a dead letter
// anyway", but not once the quarantine is over) and the message went to
// the fresh instance with those sent after the Stop (the several-clients
// model test found it: "message 144, sent before the stop, handled by
// activation 4").
func TestAStopDrawsItsLineThoughTheGrainsQuarantineEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStopLine(t, silo.Config{
			IdleQuantum:         time.Hour,                                                             // no idle tick ends the quarantine's record
			DeactivationTimeout: time.Hour,                                                             // the hook runs for as long as the test says
			Supervision:         activation.Supervision{MaxRestarts: -1, Quarantine: 10 * time.Second}, // the first failure stops the grain
		})
		require.NoError(t, e.s.Tell(e.ctx, e.id, "boom"))
		<-e.hookIn                   // stopped by supervision, its hook waits off the partition
		time.Sleep(11 * time.Second) // the quarantine is over; the grain is not gone
		e.hold(t)
		require.NoError(t, e.s.Tell(e.ctx, e.id, "before"))
		require.NoError(t, e.s.Stop(e.ctx, e.id))
		close(e.holdRelease) // one round reads the Stop and "before"
		require.NoError(t, e.s.Tell(e.ctx, e.id, "after"))
		synctest.Wait()
		close(e.hookRelease) // the grain goes; a fresh instance for what waits
		e.outcomes(t, "dead before (stopped)", "handled after")
	})
}

// stopLine is a silo of one partition, in a synctest bubble, with a grain
// of kind "g" whose first instance's OnDeactivate waits until hookRelease
// closes (the kind slowGoer), and a grain that holds the partition's owner
// until holdRelease closes (hold).
type stopLine struct {
	s                        *silo.Silo
	ctx                      context.Context
	id                       grain.ID
	got                      chan string
	hookIn                   chan struct{}
	hookRelease, holdRelease chan struct{}
	held                     chan struct{}
	dead                     *silo.DeadLetters
}

func newStopLine(t *testing.T, cfg silo.Config) *stopLine {
	e := &stopLine{ctx: context.Background(), id: grain.NewID("g", "k"), got: make(chan string, 8),
		hookIn: make(chan struct{}), hookRelease: make(chan struct{}), holdRelease: make(chan struct{}), held: make(chan struct{})}
	cfg.Partitions = 1               // the holder holds the grain's partition
	cfg.HandoffThreshold = time.Hour // and is not handed off meanwhile
	cfg.Logger = newTextLogger(io.Discard)
	s, err := silo.New(cfg)
	require.NoError(t, err)
	n := 0
	require.NoError(t, silo.Register(s, "g", func(grain.ID) *slowGoer {
		n++
		return &slowGoer{got: e.got, hookIn: e.hookIn, release: e.hookRelease, inst: n}
	}))
	require.NoError(t, silo.Register(s, "hold", func(grain.ID) *ownerHolder {
		return &ownerHolder{in: e.held, release: e.holdRelease}
	}))
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	e.s, e.dead = s, s.SubscribeDeadLetters(8)
	t.Cleanup(e.dead.Cancel)
	return e
}

// hold makes the holder hold the owner: what is sent until holdRelease
// closes waits in the queue, to be read in one round.
func (e *stopLine) hold(t *testing.T) {
	require.NoError(t, e.s.Tell(e.ctx, grain.NewID("hold", "h"), "hold"))
	<-e.held
}

// outcomes checks what became of the grain's messages: each handled, or a
// dead letter with its reason. The handled ones are checked in their order,
// and the dead letters in theirs; the two come on different channels, so
// which of a dead letter and a handled message the test reads first says
// nothing (a select with both ready picks either: once under load).
func (e *stopLine) outcomes(t *testing.T, want ...string) {
	var got []string
	for len(got) < len(want) {
		select {
		case m := <-e.got:
			got = append(got, "handled "+m)
		case d := <-e.dead.C:
			got = append(got, "dead "+d.Msg.(string)+" ("+d.Reason.String()+")")
		}
	}
	byStream := func(all []string) (handled, dead []string) {
		for _, o := range all {
			if strings.HasPrefix(o, "dead ") {
				dead = append(dead, o)
			} else {
				handled = append(handled, o)
			}
		}
		return handled, dead
	}
	wantHandled, wantDead := byStream(want)
	gotHandled, gotDead := byStream(got)
	require.Equal(t, wantHandled, gotHandled, "handled, in order")
	require.Equal(t, wantDead, gotDead, "dead letters, in order")
	synctest.Wait()
	require.Empty(t, e.got)
}
