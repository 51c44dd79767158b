package silo_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Messages of the watched grain.
type (
	watch   struct{ id grain.ID }
	unwatch struct{ id grain.ID }
	happen  struct{ what string }
	watched struct{} // asks how many subscribers the grain has
)

// watchedGrain notifies its subscribers of everything that happens to it,
// and says goodbye from OnDeactivate.
type watchedGrain struct {
	subs  grain.Observers
	tells *atomic.Int64 // if set, counts the tells of its notifications
}

// countingTeller counts the tells it passes on.
type countingTeller struct {
	grain.Teller
	n *atomic.Int64
}

func (t countingTeller) Tell(ctx context.Context, id grain.ID, msg any) error {
	t.n.Add(1)
	return t.Teller.Tell(ctx, id, msg)
}

func (g *watchedGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case watch:
		return g.subs.Subscribe(m.id)
	case unwatch:
		return g.subs.Unsubscribe(m.id), nil
	case happen:
		var t grain.Teller = c.Silo()
		if g.tells != nil {
			t = countingTeller{t, g.tells}
		}
		return nil, g.subs.Notify(ctx, t, c.ID().Key()+": "+m.what)
	case watched:
		return g.subs.Len(), nil
	}
	return nil, fmt.Errorf("watched: unknown message %T", msg)
}

func (g *watchedGrain) OnDeactivate(ctx context.Context, c *grain.Context) error {
	return g.subs.Notify(ctx, c.Silo(), c.ID().Key()+": bye")
}

var _ grain.Deactivator = (*watchedGrain)(nil)

func watchSilo(t *testing.T, cfg silo.Config) *silo.Silo {
	t.Helper()
	return newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "watched", func(grain.ID) *watchedGrain { return &watchedGrain{} }))
	})
}

func newObserver(t *testing.T, s *silo.Silo, buffer int) *silo.Observer {
	t.Helper()
	o, err := s.NewObserver(buffer)
	require.NoError(t, err)
	t.Cleanup(o.Close)
	return o
}

// A grain's notifications reach the observers subscribed to it, in the
// order the grain sent them, and each observer only what it subscribed to.
func TestObserverReceivesAGrainsNotifications(t *testing.T) {
	s := watchSilo(t, silo.Config{})
	ctx := ctxT(t)
	a, b := newObserver(t, s, 16), newObserver(t, s, 16)
	require.NotEqual(t, a.ID(), b.ID())
	assert.True(t, a.ID().IsObserver())
	assert.Equal(t, grain.ObserverKind, a.ID().Kind())

	g1, g2 := grain.NewID("watched", "one"), grain.NewID("watched", "two")
	for _, sub := range []struct{ g, o grain.ID }{{g1, a.ID()}, {g1, b.ID()}, {g2, b.ID()}} {
		added, err := silo.Call[bool](ctx, s, sub.g, watch{sub.o})
		require.NoError(t, err)
		require.True(t, added)
	}
	again, err := silo.Call[bool](ctx, s, g1, watch{a.ID()})
	require.NoError(t, err)
	assert.False(t, again, "subscribing twice keeps one subscription")

	for _, what := range []string{"x", "y", "z"} {
		require.NoError(t, s.Tell(ctx, g1, happen{what}))
	}
	require.NoError(t, s.Tell(ctx, g2, happen{"w"}))

	for _, want := range []string{"one: x", "one: y", "one: z"} {
		got, err := a.Receive(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, got.Msg)
		assert.Equal(t, g1, got.Sender)
	}
	var fromB []string
	for range 4 {
		got, err := b.Receive(ctx)
		require.NoError(t, err)
		fromB = append(fromB, got.Msg.(string))
	}
	// Each grain's in order; the two grains' interleaved as they ran.
	assert.Equal(t, []string{"one: x", "one: y", "one: z"}, filterPrefix(fromB, "one: "))
	assert.Equal(t, []string{"two: w"}, filterPrefix(fromB, "two: "))

	removed, err := silo.Call[bool](ctx, s, g1, unwatch{b.ID()})
	require.NoError(t, err)
	require.True(t, removed)
	_, err = s.Ask(ctx, g1, happen{"after"})
	require.NoError(t, err)
	got, err := a.Receive(ctx)
	require.NoError(t, err)
	assert.Equal(t, "one: after", got.Msg)
	select {
	case m := <-b.C():
		t.Fatalf("an unsubscribed observer got %v", m)
	default:
	}
}

func filterPrefix(ss []string, prefix string) []string {
	var out []string
	for _, s := range ss {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			out = append(out, s)
		}
	}
	return out
}

// An observer never makes its sender wait: past its buffer, a tell is
// refused with ErrOverloaded and becomes a dead letter, with its sender.
func TestObserverBufferFullRefusesTheTell(t *testing.T) {
	s := watchSilo(t, silo.Config{})
	ctx := ctxT(t)
	dead := s.SubscribeDeadLetters(8)
	defer dead.Cancel()
	o := newObserver(t, s, 1)
	g := grain.NewID("watched", "g")
	_, err := s.Ask(ctx, g, watch{o.ID()})
	require.NoError(t, err)

	_, err = s.Ask(ctx, g, happen{"first"})
	require.NoError(t, err)
	_, err = s.Ask(ctx, g, happen{"second"})
	require.ErrorIs(t, err, grain.ErrOverloaded, "Notify reports the subscriber it could not tell")
	assert.Contains(t, err.Error(), o.ID().String())

	dl := <-dead.C
	assert.Equal(t, grain.ReasonOverload, dl.Reason)
	assert.Equal(t, o.ID(), dl.Target)
	assert.Equal(t, g, dl.Sender, "the grain that told it")
	assert.Equal(t, "g: second", dl.Msg)
	assert.Equal(t, uint64(1), s.Stats().DeadLetters[grain.ReasonOverload])

	n, err := silo.Call[int](ctx, s, g, watched{})
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a slow observer stays subscribed")
	got, err := o.Receive(ctx)
	require.NoError(t, err)
	assert.Equal(t, silo.Notification{Msg: "g: first", Sender: g}, got)
	require.NoError(t, s.Tell(ctx, o.ID(), "from outside"), "room again")
}

// Receive with an ended ctx takes a notification the observer holds —
// every time, not as a select between two ready cases would, half the time
// — and returns the ctx's error once it holds none.
func TestObserverReceiveTakesWhatItHoldsWhateverTheCtx(t *testing.T) {
	s := watchSilo(t, silo.Config{})
	o := newObserver(t, s, 64)
	ended, cancel := context.WithCancel(ctxT(t))
	cancel()
	for round := range 20 {
		for i := range 3 {
			require.NoError(t, s.Tell(ctxT(t), o.ID(), i))
		}
		for i := range 3 {
			n, err := o.Receive(ended)
			require.NoError(t, err, "round %d", round)
			assert.Equal(t, i, n.Msg)
		}
		_, err := o.Receive(ended)
		require.ErrorIs(t, err, context.Canceled)
	}
}

// Close turns what the observer held into dead letters, ends C and
// Receive, and makes later tells fail; the grains that notify it drop it.
func TestClosedObserver(t *testing.T) {
	s := watchSilo(t, silo.Config{})
	ctx := ctxT(t)
	dead := s.SubscribeDeadLetters(8)
	defer dead.Cancel()
	gone, stays := newObserver(t, s, 4), newObserver(t, s, 4)
	g := grain.NewID("watched", "g")
	for _, o := range []*silo.Observer{gone, stays} {
		_, err := s.Ask(ctx, g, watch{o.ID()})
		require.NoError(t, err)
	}
	_, err := s.Ask(ctx, g, happen{"unread"})
	require.NoError(t, err)

	assert.Equal(t, 2, s.Stats().Observers)
	gone.Close()
	gone.Close() // twice: nothing more
	assert.Equal(t, 1, s.Stats().Observers)
	dl := <-dead.C
	assert.Equal(t, grain.ReasonObserverClosed, dl.Reason)
	assert.Equal(t, "g: unread", dl.Msg)
	assert.Equal(t, g, dl.Sender)
	_, open := <-gone.C()
	assert.False(t, open)
	_, err = gone.Receive(ctx)
	require.ErrorIs(t, err, grain.ErrObserverClosed)

	err = s.Tell(ctx, gone.ID(), "late")
	require.ErrorIs(t, err, grain.ErrObserverClosed)
	dl = <-dead.C
	assert.Equal(t, grain.ReasonObserverClosed, dl.Reason)
	assert.Equal(t, "late", dl.Msg)
	assert.True(t, dl.Sender.IsZero())

	// The grain drops the closed observer without an error, and keeps
	// telling the other.
	_, err = s.Ask(ctx, g, happen{"next"})
	require.NoError(t, err)
	n, err := silo.Call[int](ctx, s, g, watched{})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	for _, want := range []string{"g: unread", "g: next"} {
		got, err := stays.Receive(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, got.Msg)
	}
	// The unread one, the late one, and the grain's tell that found the
	// observer closed and dropped it.
	assert.Equal(t, uint64(3), s.Stats().DeadLetters[grain.ReasonObserverClosed])
}

// What is not an open observer of this silo is refused the same way: an ID
// never made, and one of another silo, even one of the same name.
func TestObserverIDsAreTheirSilos(t *testing.T) {
	s1, s2 := watchSilo(t, silo.Config{}), watchSilo(t, silo.Config{})
	ctx := ctxT(t)
	o := newObserver(t, s1, 1)
	err := s2.Tell(ctx, o.ID(), "wrong silo")
	require.ErrorIs(t, err, grain.ErrObserverClosed)
	assert.Contains(t, err.Error(), "not an observer of this silo")
	require.ErrorIs(t, s1.Tell(ctx, grain.NewID(grain.ObserverKind, "made-up"), "x"), grain.ErrObserverClosed)
	select {
	case m := <-o.C():
		t.Fatalf("got %v", m)
	default:
	}
	require.NoError(t, s1.Tell(ctx, o.ID(), "right silo"))
	assert.Equal(t, silo.Notification{Msg: "right silo"}, <-o.C(), "told from outside any grain: no sender")
}

// Bad input to an observer is refused, as to a grain, before anything is
// sent.
func TestObserverRefusals(t *testing.T) {
	s := watchSilo(t, silo.Config{})
	ctx := ctxT(t)
	o := newObserver(t, s, 1)

	_, err := s.Ask(ctx, o.ID(), "reply?")
	require.ErrorIs(t, err, grain.ErrObserverAsk)
	_, err = silo.Call[int](ctx, s, o.ID(), "reply?")
	require.ErrorIs(t, err, grain.ErrObserverAsk)
	require.ErrorIs(t, s.Tell(ctx, o.ID(), nil), grain.ErrNilMessage)
	require.ErrorIs(t, s.Tell(ctx, grain.NewIntID(grain.ObserverKind, 1), "x"), grain.ErrInvalidID)
	//lint:ignore SA1012 a nil ctx is the bad input under test
	_, err = o.Receive(nil)
	require.ErrorIs(t, err, grain.ErrNilContext)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = o.Receive(cctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.Tell(cctx, o.ID(), "x"), context.Canceled)

	// Too small, or too large to allocate up front (math.MaxInt was a
	// panic in make).
	for _, n := range []int{0, -1, silo.MaxObserverBuffer + 1, math.MaxInt} {
		_, err := s.NewObserver(n)
		require.ErrorIs(t, err, grain.ErrInvalidConfig)
	}
	big, err := s.NewObserver(silo.MaxObserverBuffer)
	require.NoError(t, err)
	big.Close()
	var zero silo.Silo
	_, err = zero.NewObserver(1)
	require.ErrorIs(t, err, grain.ErrSiloClosed)
	// An Observer not made by NewObserver is a closed one, not a panic.
	for _, bad := range []*silo.Observer{nil, {}} {
		bad.Close()
		_, open := <-bad.C()
		assert.False(t, open)
		_, err = bad.Receive(ctx)
		require.ErrorIs(t, err, grain.ErrObserverClosed)
		assert.True(t, bad.ID().IsZero())
		require.Error(t, s.Tell(ctx, bad.ID(), "x"))
	}
	assert.Zero(t, s.Stats().DeadLetters[grain.ReasonObserverClosed]+s.Stats().DeadLetters[grain.ReasonOverload],
		"nothing was sent")

	s2, err := silo.New(silo.Config{})
	require.NoError(t, err)
	err = silo.Register(s2, grain.ObserverKind, func(grain.ID) *counter { return &counter{} })
	require.ErrorIs(t, err, grain.ErrInvalidKind)
}

// When the silo shuts down, the goodbyes its grains send from OnDeactivate
// reach the observers; then the observers close, what they hold still
// readable, and no new one is made.
func TestObserversCloseWithTheirSilo(t *testing.T) {
	s := watchSilo(t, silo.Config{})
	ctx := ctxT(t)
	o := newObserver(t, s, 8)
	for _, key := range []string{"a", "b"} {
		_, err := s.Ask(ctx, grain.NewID("watched", key), watch{o.ID()})
		require.NoError(t, err)
	}
	require.NoError(t, s.Shutdown(ctx))
	assert.Zero(t, s.Stats().Observers, "closed with their silo")

	var got []string
	for n := range o.C() { // ends: the silo closed it
		got = append(got, n.Msg.(string))
	}
	assert.ElementsMatch(t, []string{"a: bye", "b: bye"}, got)
	_, err := o.Receive(ctx)
	require.ErrorIs(t, err, grain.ErrObserverClosed)
	_, err = s.NewObserver(1)
	require.ErrorIs(t, err, grain.ErrSiloClosed)
	require.ErrorIs(t, s.Tell(ctx, o.ID(), "x"), grain.ErrSiloClosed)

	// A silo closed before it started refuses them too.
	s2, err := silo.New(silo.Config{})
	require.NoError(t, err)
	early, err := s2.NewObserver(1)
	require.NoError(t, err, "made before Start, as kinds are registered")
	require.NoError(t, s2.Close())
	_, open := <-early.C()
	assert.False(t, open)
	_, err = s2.NewObserver(1)
	require.ErrorIs(t, err, grain.ErrSiloClosed)
}

// A Close after the silo closed the observer still accounts for what was
// left unread: nothing is lost without a trace.
func TestObserverCloseAfterItsSiloStopped(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	o, err := s.NewObserver(4)
	require.NoError(t, err)
	ctx := ctxT(t)
	require.NoError(t, s.Tell(ctx, o.ID(), "one"))
	require.NoError(t, s.Tell(ctx, o.ID(), "two"))
	require.NoError(t, s.Close())
	assert.Equal(t, "one", (<-o.C()).Msg)
	o.Close()
	assert.Equal(t, uint64(1), s.Stats().DeadLetters[grain.ReasonObserverClosed])
}

// Many grains notify observers while they are closed: every notification is
// received or is a dead letter, once.
func TestObserverEveryMessageReceivedOrDeadLettered(t *testing.T) {
	var tells atomic.Int64
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "watched", func(grain.ID) *watchedGrain { return &watchedGrain{tells: &tells} }))
	})
	ctx := ctxT(t)
	const grains, observers, events = 8, 4, 200
	var obs []*silo.Observer
	for range observers {
		obs = append(obs, newObserver(t, s, 16))
	}
	for i := range grains {
		for _, o := range obs {
			_, err := s.Ask(ctx, grain.NewIntID("watched", int64(i)), watch{o.ID()})
			require.NoError(t, err)
		}
	}
	var received [observers]int
	var wg sync.WaitGroup
	for i, o := range obs {
		wg.Go(func() {
			for range o.C() {
				received[i]++
			}
		})
	}
	var sendErrs sync.Map
	send := func(from, to int) {
		var senders sync.WaitGroup
		for i := range grains {
			senders.Go(func() {
				for e := from; e < to; e++ {
					_, err := s.Ask(ctx, grain.NewIntID("watched", int64(i)), happen{fmt.Sprint(e)})
					if err != nil && !errors.Is(err, grain.ErrOverloaded) {
						sendErrs.Store(err.Error(), true)
					}
				}
			})
		}
		senders.Wait()
	}
	// Half the observers go away mid-stream, while what the first half of
	// the events sent them is still on its way: every grain notifies them
	// after, and drops them. (Closed by their readers at their hundredth
	// message, a reader kept off its core read less by the time the grains
	// were done, and a grain that never saw its observer closed kept it.)
	send(0, events/2)
	for i, o := range obs {
		if i%2 == 0 {
			o.Close()
		}
	}
	send(events/2, events)
	sendErrs.Range(func(k, _ any) bool {
		t.Errorf("unexpected notify error: %v", k)
		return true
	})
	for _, o := range obs {
		o.Close()
	}
	wg.Wait()

	st := s.Stats()
	total := 0
	for _, n := range received {
		total += n
	}
	deadLetters := int(st.DeadLetters[grain.ReasonOverload] + st.DeadLetters[grain.ReasonObserverClosed])
	assert.Equal(t, int(tells.Load()), total+deadLetters, "every tell was received or is a dead letter")
	assert.Less(t, total, grains*events*observers, "the closed observers missed some")
	notified := 0
	for i := range grains {
		n, err := silo.Call[int](ctx, s, grain.NewIntID("watched", int64(i)), watched{})
		require.NoError(t, err)
		notified += n
	}
	assert.Equal(t, grains*observers/2, notified, "every grain dropped the observers closed mid-stream, and only those")
}

// What a tell carries of its sender's ctx (Config.Propagator) reaches the
// observer with the message, and its dead letter when refused.
func TestObserverNotificationCarries(t *testing.T) {
	s := watchSilo(t, silo.Config{Propagator: traceProp})
	ctx := context.WithValue(ctxT(t), traceKey{}, "trace-7")
	dead := s.SubscribeDeadLetters(4)
	defer dead.Cancel()
	o := newObserver(t, s, 1)
	g := grain.NewID("watched", "g")
	_, err := s.Ask(ctx, g, watch{o.ID()})
	require.NoError(t, err)

	// A tell to the grain carries the trace into its turn, and the turn's
	// notification carries it on to the observer.
	require.NoError(t, s.Tell(ctx, g, happen{"x"}))
	n, err := o.Receive(ctx)
	require.NoError(t, err)
	assert.Equal(t, silo.Notification{Msg: "g: x", Sender: g, Carried: "trace-7"}, n)

	require.NoError(t, s.Tell(ctx, o.ID(), "direct"))
	err = s.Tell(ctx, o.ID(), "refused")
	require.ErrorIs(t, err, grain.ErrOverloaded)
	assert.EqualError(t, err, "granary: grain overloaded: observer "+o.ID().String()+", its buffer full")
	dl := <-dead.C
	assert.Equal(t, "refused", dl.Msg)
	assert.Equal(t, "trace-7", dl.Carried)
	n, err = o.Receive(context.Background())
	require.NoError(t, err)
	assert.Equal(t, silo.Notification{Msg: "direct", Carried: "trace-7"}, n)
}
