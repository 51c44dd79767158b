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

// staleTicker reports each tick it gets, and holds a turn until released,
// then does what the hold says to its timers: the way a tick comes to wait
// in the grain's mailbox behind a turn that stops or replaces its timer.
type staleTicker struct {
	ticks   chan<- string
	release <-chan struct{}
}

type (
	tickEvery struct {
		msg   string
		every time.Duration
	}
	holdThen func(*grain.Context)
)

func (g *staleTicker) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case tickEvery:
		return nil, c.StartTimer("t", m.every, m.every, m.msg)
	case holdThen:
		<-g.release
		m(c)
	case string:
		g.ticks <- m
	}
	return nil, nil
}

// staleSilo starts a silo, in the test's synctest bubble, with the kind
// "stale" of staleTickers that report on ticks and hold until release is
// closed.
func staleSilo(t *testing.T) (s *silo.Silo, ticks chan string, release chan struct{}) {
	ticks, release = make(chan string, 16), make(chan struct{})
	s, err := silo.New(silo.Config{Logger: newTextLogger(io.Discard)})
	require.NoError(t, err)
	require.NoError(t, silo.Register(s, "stale", func(grain.ID) *staleTicker {
		return &staleTicker{ticks: ticks, release: release}
	}))
	require.NoError(t, s.Start())
	return s, ticks, release
}

// A tick already waiting in the mailbox when its timer is stopped or
// replaced — or when the instance that started it is replaced by a
// restart — is not delivered, as Akka guarantees for a cancelled timer:
// StopTimer means no tick after the turn that calls it, not "no tick but
// the one already on its way".
func TestATickQueuedBeforeItsTimerEndedIsNotDelivered(t *testing.T) {
	for _, tc := range []struct {
		name string
		then holdThen
		want []string // the ticks the grain gets in the second after
	}{
		{"stopped", func(c *grain.Context) { c.StopTimer("t") }, nil},
		{"replaced", func(c *grain.Context) { _ = c.StartTimer("t", time.Second, 0, "new") }, []string{"new"}},
		{"restarted", func(*grain.Context) { panic("the instance that started the timer goes") }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, ticks, release := staleSilo(t)
				defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
				id := grain.NewID("stale", "g")
				ctx := context.Background()

				_, err := s.Ask(ctx, id, tickEvery{"old", time.Second})
				require.NoError(t, err)
				require.NoError(t, s.Tell(ctx, id, tc.then))
				time.Sleep(time.Second) // the tick falls due while the hold's turn runs
				synctest.Wait()         // and waits in the mailbox behind it
				require.Empty(t, ticks)
				close(release)
				_, err = s.Ask(ctx, id, "after") // behind the tick: the grain has dealt with it
				require.NoError(t, err)
				require.Equal(t, "after", <-ticks)
				time.Sleep(time.Second)
				synctest.Wait()
				var got []string
				for len(ticks) > 0 {
					got = append(got, <-ticks)
				}
				require.Equal(t, tc.want, got)
			})
		})
	}
}

// callThen does before, then calls callee and waits for its answer: a turn
// of a reentrant grain, beside which ticks interleave while it waits.
type callThen struct {
	before func(*grain.Context)
	callee grain.ID
}

// timerEndings is what a turn does to a grain's timer "t", ticking "old"
// every second, and the ticks the grain gets after it: none, a new
// timer's, the old one's on.
func timerEndings() []struct {
	name string
	end  func(*grain.Context)
	want []string
} {
	return []struct {
		name string
		end  func(*grain.Context)
		want []string
	}{
		{"stopped", func(c *grain.Context) { c.StopTimer("t") }, nil},
		{"replaced", func(c *grain.Context) { _ = c.StartTimer("t", time.Second, 0, "new") }, []string{"new"}},
		{"kept", func(*grain.Context) {}, []string{"old", "old"}},
	}
}

// reentrantTickers starts a silo, in the test's synctest bubble, with the
// kind "callee" of staleTickers that report on ticks and hold until release
// is closed, and the kind "reentrant" of the same, whose callThen does its
// before, if any, then calls its callee and waits for it; and starts the
// timer "t" of its grain id, ticking "old" every second.
func reentrantTickers(t *testing.T) (s *silo.Silo, id grain.ID, ticks chan string, release chan struct{}) {
	ticks, release = make(chan string, 16), make(chan struct{})
	s, err := silo.New(silo.Config{Logger: newTextLogger(io.Discard)})
	require.NoError(t, err)
	newTicker := func(grain.ID) *staleTicker { return &staleTicker{ticks: ticks, release: release} }
	require.NoError(t, silo.Register(s, "reentrant", func(id grain.ID) grain.Grain {
		g := newTicker(id)
		return grain.Func(func(ctx context.Context, c *grain.Context, msg any) (any, error) {
			if m, ok := msg.(callThen); ok {
				if m.before != nil {
					m.before(c)
				}
				return c.Silo().Ask(ctx, m.callee, holdThen(func(*grain.Context) {}))
			}
			return g.Receive(ctx, c, msg)
		})
	}, silo.WithReentrant()))
	require.NoError(t, silo.Register(s, "callee", newTicker))
	require.NoError(t, s.Start())
	id = grain.NewID("reentrant", "g")
	_, err = s.Ask(context.Background(), id, tickEvery{"old", time.Second})
	require.NoError(t, err)
	return s, id, ticks, release
}

// ticksBut drains what ticks holds, but for the messages but.
func ticksBut(ticks chan string, but string) []string {
	var got []string
	for len(ticks) > 0 {
		if m := <-ticks; m != but {
			got = append(got, m)
		}
	}
	return got
}

// A turn that stops its timer, or starts another under its name, and then
// waits in a call ends the timer for the ticks that would interleave
// meanwhile, though the request itself is carried out as the turn ends.
func TestATickInterleavingBesideTheTurnThatEndedItsTimerIsNotDelivered(t *testing.T) {
	for _, tc := range timerEndings() {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, id, ticks, release := reentrantTickers(t)
				defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
				ctx := context.Background()
				require.NoError(t, s.Tell(ctx, id, callThen{tc.end, grain.NewID("callee", "c")}))
				time.Sleep(time.Second) // a tick falls due while the turn waits in its call
				synctest.Wait()
				close(release)
				_, err := s.Ask(ctx, id, "after")
				require.NoError(t, err)
				time.Sleep(time.Second)
				synctest.Wait()
				require.Equal(t, tc.want, ticksBut(ticks, "after"))
			})
		})
	}
}

// Timers stop as a Shutdown begins: a tick queued by then is not delivered
// while the silo settles, though the messages queued beside it are.
func TestATickQueuedAsShutdownBeginsIsNotDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, ticks, release := staleSilo(t)
		id := grain.NewID("stale", "g")
		ctx := context.Background()

		_, err := s.Ask(ctx, id, tickEvery{"tick", time.Second})
		require.NoError(t, err)
		require.NoError(t, s.Tell(ctx, id, holdThen(func(*grain.Context) {})))
		time.Sleep(time.Second) // the tick waits behind the held turn
		require.NoError(t, s.Tell(ctx, id, "queued"))
		synctest.Wait()
		shut := make(chan error)
		go func() { shut <- s.Shutdown(ctx) }()
		synctest.Wait()
		close(release)
		require.NoError(t, <-shut)
		require.Equal(t, "queued", <-ticks)
		require.Empty(t, ticks)
	})
}

// A tick let in beside a waiting turn of a reentrant grain while another
// turn, let in too, holds the grain's turn — the tick waiting behind it
// for the turn token — is not delivered if that turn stops its timer or
// starts another under its name: "no tick of it after this turn"
// (grain.Context.StopTimer) holds for a turn that interleaves as for any.
// It was delivered: the tick was found live as it was let in, and nothing
// looked again once it had the token (the several-clients model test,
// TestSeveralClientsAtOnceKeepEveryPromise, found it: "d #4: a tick of
// timer 1 ran, its timer now 2").
func TestATickLetInBehindATurnThatEndsItsTimerIsNotDelivered(t *testing.T) {
	for _, tc := range timerEndings() {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, id, ticks, release := reentrantTickers(t)
				defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
				ctx := context.Background()
				require.NoError(t, s.Tell(ctx, id, callThen{callee: grain.NewID("callee", "c")})) // waits in its call
				require.NoError(t, s.Tell(ctx, id, holdThen(tc.end)))                             // let in: holds the turn
				time.Sleep(time.Second)                                                           // the tick falls due, is let in, waits behind it
				synctest.Wait()
				require.Empty(t, ticks)
				close(release)
				_, err := s.Ask(ctx, id, "after")
				require.NoError(t, err)
				time.Sleep(time.Second)
				synctest.Wait()
				require.Equal(t, tc.want, ticksBut(ticks, "after"))
			})
		})
	}
}
