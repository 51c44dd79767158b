package silo_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// pacer tells itself in a loop, one message a round of its partition's
// owner, until stop: its turns count the rounds.
type pacer struct {
	turns *atomic.Int64
	stop  *atomic.Bool
}

type pace struct{ first chan<- struct{} }

func (p pacer) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	m, ok := msg.(pace)
	if !ok || p.stop.Load() {
		return nil, nil
	}
	if p.turns.Add(1) == 1 {
		close(m.first)
	}
	return nil, gc.Silo().Tell(ctx, gc.ID(), pace{})
}

// hot counts its messages; asked "rounds", it answers how many rounds the
// pacer has seen since its first message (after a holdUntil): both are
// read in its turns, so how soon the held turn's goroutine runs again
// does not count.
type hot struct {
	n      int
	from   int64
	rounds *atomic.Int64
}

func (h *hot) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case holdUntil:
		close(m.started)
		<-m.release
	case time.Duration:
		busyWork(m) // a slow turn
	case string:
		return h.rounds.Load() - h.from, nil
	default:
		if h.n == 0 {
			h.from = h.rounds.Load()
		}
		h.n++
	}
	return nil, nil
}

// A grain with a backlog keeps pace with its messages: it takes as many
// turns a round as its partition was sent messages, not one. With one a
// round, a hot grain (a lobby, a leaderboard) that fell behind once — its
// turn handed off while messages came — stayed behind for as long as it
// was sent more than one message a round: its backlog grew until the
// backlog limit refused its messages, though its partition had time to
// spare (the example game, 3,000 bots: its lobby's messages waited up to
// 2 s and the matches collapsed to a tenth).
func TestABackloggedGrainKeepsPace(t *testing.T) {
	const backlog = 2_000
	var rounds atomic.Int64
	var stop atomic.Bool
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hot", func(grain.ID) *hot { return &hot{rounds: &rounds} }))
		require.NoError(t, silo.Register(s, "pacer", func(grain.ID) pacer { return pacer{&rounds, &stop} }))
	})
	t.Cleanup(func() { stop.Store(true) }) // before the silo closes: cleanups run last first
	ctx := ctxT(t)
	h := grain.NewID("hot", "lobby")

	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Tell(ctx, h, holdUntil{started, release}))
	<-started // its turn holds on: what comes now waits in its mailbox
	for range backlog {
		require.NoError(t, s.Tell(ctx, h, incr{1}))
	}
	first := make(chan struct{})
	require.NoError(t, s.Tell(ctx, grain.NewID("pacer", "p"), pace{first}))
	<-first // sent after them: the backlog is in the mailbox now
	close(release)

	seen, err := silo.Call[int64](ctx, s, h, "rounds")
	require.NoError(t, err)
	// One turn a round: the pacer would have seen a round for each
	// message of the backlog. Keeping pace: a few rounds in all.
	t.Logf("%d rounds", seen)
	require.Less(t, seen, int64(backlog/4), "rounds the backlog of %d took", backlog)
}

// A backlogged grain whose steps were once measured slow keeps pace once
// they are quick again, while code outside keeps sending its partition's
// other grains messages — where a slow flood's steps cannot be stepped
// off (stepoff.go): on one core, or with the cores crowded. A slow flood
// steps once a round there while a neighbour's message waits, and its mark
// of slow steps was cleared only by two of its steps timed back to back in
// one round, which the neighbours' messages never left it: a few steps
// stretched past stepOffMin (by their own work, or by the owner preempted)
// left a hot grain one step a round for good. The example game with 5,000
// bots: the lobby's backlog grew to thousands, and matches meant to last
// 20 ms waited up to 2.9 s for their players' results (3,200–21,000
// matches in 3 s, where there are 48,000–67,000 now). Each step of a
// grain marked slow is timed now (partition.timedStep).
func TestABackloggedGrainOnceSlowKeepsPaceBesideOutsideSenders(t *testing.T) {
	t.Run("one core", func(t *testing.T) {
		prev := runtime.GOMAXPROCS(1) // before Start, which reads it
		t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
		backloggedOnceSlow(t)
	})
	t.Run("crowded", func(t *testing.T) {
		end := silo.StartCrowd(64 * runtime.GOMAXPROCS(0))
		t.Cleanup(end)
		backloggedOnceSlow(t)
	})
}

func backloggedOnceSlow(t *testing.T) {
	const backlog, slow = 2_000, 8
	var rounds atomic.Int64
	var stop atomic.Bool
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hot", func(grain.ID) *hot { return &hot{rounds: &rounds} }))
		require.NoError(t, silo.Register(s, "pacer", func(grain.ID) pacer { return pacer{&rounds, &stop} }))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	t.Cleanup(func() { stop.Store(true) })
	ctx := ctxT(t)
	h := grain.NewID("hot", "lobby")

	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Tell(ctx, h, holdUntil{started, release}))
	<-started
	for range slow {
		require.NoError(t, s.Tell(ctx, h, 200*time.Microsecond)) // steps measured slow
	}
	for range backlog {
		require.NoError(t, s.Tell(ctx, h, incr{1}))
	}
	first := make(chan struct{})
	require.NoError(t, s.Tell(ctx, grain.NewID("pacer", "p"), pace{first}))
	<-first

	// Outside callers: asks for the partition's other grains come all the
	// while, as a service's clients' do.
	done := make(chan struct{})
	var callers sync.WaitGroup
	for i := range 64 {
		callers.Go(func() {
			id := grain.NewIntID("counter", int64(i%8))
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.Ask(ctx, id, incr{1}); err != nil {
					return
				}
			}
		})
	}
	close(release)
	seen, err := silo.Call[int64](ctx, s, h, "rounds")
	close(done)
	callers.Wait()
	require.NoError(t, err)
	t.Logf("%d rounds", seen)
	require.Less(t, seen, int64(backlog/4), "rounds the backlog of %d took", backlog)
}
