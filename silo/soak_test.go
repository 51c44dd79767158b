package silo_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

type soakMsg struct {
	id    int64
	panic bool
	sleep bool
	await bool // wait in silo.Await: an await point
	peek  bool // taken by the interleaving kind's predicate
}

type soakGrain struct {
	handled *sync.Map   // message id -> *atomic.Int32
	guard   turnGuard   // two turns of one activation at once: an overlap
	peeked  atomic.Bool // a message the predicate takes has had its turn
}

func (g *soakGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	g.guard.enter()
	defer g.guard.leave()
	m := msg.(soakMsg)
	if m.peek {
		defer g.peeked.Store(true)
	}
	n, _ := g.handled.LoadOrStore(m.id, new(atomic.Int32))
	n.(*atomic.Int32).Add(1)
	if m.panic {
		panic("soak")
	}
	if m.sleep {
		busyWork(200 * time.Microsecond) // a slow turn, to provoke handoffs
	}
	if m.await { // others of the grain may run meanwhile, and end before it goes on
		// One that the interleaving kind's predicate takes, sent now so
		// that it comes while this turn waits (its id negative: no sender
		// counts it).
		g.peeked.Store(false)
		_ = c.Silo().Tell(ctx, c.ID(), soakMsg{id: -m.id, peek: true})
		g.guard.leave()
		_ = silo.Await(ctx, func() error {
			// The wait lasts until that message's turn has run here, or
			// a millisecond (it may have been refused, or gone to the
			// next activation).
			for start := time.Now(); !g.peeked.Load() && time.Since(start) < time.Millisecond; {
				runtime.Gosched()
			}
			return nil
		})
		g.guard.enter()
	}
	if m.id%97 == 0 {
		c.DeactivateOnIdle()
	}
	return m.id, nil
}

// soakHooked is soakGrain with an OnActivate that now and then holds its
// activation past the interleaving variant's ActivationTimeout (the silo
// clock runs fast in the soak: a millisecond a yield).
type soakHooked struct{ soakGrain }

func (g *soakHooked) OnActivate(context.Context, *grain.Context) error {
	if rand.IntN(5) == 0 {
		busyWork(time.Duration(1+rand.IntN(3)) * time.Millisecond)
		if rand.IntN(4) == 0 { // a load that fails: its messages are dead letters
			return errSoakLoad
		}
	}
	return nil
}

var errSoakLoad = errors.New("soak: load failed")

// TestSoakEveryMessageHandledOrDeadLettered runs many senders against grains
// that panic at random, with idle deactivation on an injected clock racing
// new messages, an activation cap forcing evictions, restarts backing off,
// and a shutdown in the middle of the load. It checks the rule: every
// message accepted is either handled exactly once or a dead letter exactly
// once, and every ask returns.
func TestSoakEveryMessageHandledOrDeadLettered(t *testing.T) {
	t.Run("graceful shutdown", func(t *testing.T) { soak(t, 2*time.Second, false) })
	t.Run("shutdown past its deadline", func(t *testing.T) { soak(t, time.Millisecond, false) })
	// Turns wait in Await while the messages the kind's predicate takes
	// interleave with them, failing too; some activations overrun a short
	// ActivationTimeout, and are given up on; and memory runs short now and
	// then, shedding activations.
	t.Run("interleaving, graceful shutdown", func(t *testing.T) { soak(t, 2*time.Second, true) })
	t.Run("interleaving, shutdown past its deadline", func(t *testing.T) { soak(t, time.Millisecond, true) })
	// Close's wait for the turns still running (DeactivationTimeout) ends
	// before the activations under way do: what they held must still be
	// handled or a dead letter, published before Close returns.
	t.Run("interleaving, shutdown past its deadline, no grace", func(t *testing.T) {
		soak(t, time.Millisecond, true, func(c *silo.Config) { c.DeactivationTimeout = time.Microsecond })
	})
	// Partition queues of eight messages: senders wait for room all the
	// time, woken by the drains that hold it for them, while Stops,
	// Deactivates, quarantines and the shutdown race them.
	t.Run("a small queue", func(t *testing.T) {
		soak(t, 2*time.Second, true, func(c *silo.Config) { c.QueueCapacity = 8 })
	})
	// Thousands of grains, no cap, the clock jumping past the idle timeout
	// now and then: bursts of idleness larger than a slice of the idle
	// collection and of the ready list, which the owner takes a slice a
	// round while the messages that call some of them off come in.
	t.Run("bursts of idleness", func(t *testing.T) {
		soakShaped(t, soakShape{grains: 3000, jumps: true}, 2*time.Second, true, func(c *silo.Config) { c.MaxActivations = 0 })
	})
	// One message in three to one grain: its rounds run past their time
	// slice, its messages wait in its backlog, which fills and holds its
	// senders at its door while its turns run (in line, let in a round's
	// room at a time), and overflows while one is handed off past its grace
	// — with Stops, Deactivates and the shutdown racing, and senders
	// waiting for room in queues of eight.
	t.Run("a flood to one grain", func(t *testing.T) {
		soakShaped(t, soakShape{grains: 100, hot: true}, 2*time.Second, true, func(c *silo.Config) { c.QueueCapacity = 8 })
	})
}

// soakShape is what soakShaped loads: how many grains, and whether the
// clock jumps past their idle timeout now and then.
type soakShape struct {
	grains int
	jumps  bool
	hot    bool // one message in three to grain 0
}

func soak(t *testing.T, shutdownDeadline time.Duration, interleaving bool, tweak ...func(*silo.Config)) {
	soakShaped(t, soakShape{grains: 100}, shutdownDeadline, interleaving, tweak...)
}

func soakShaped(t *testing.T, shape soakShape, shutdownDeadline time.Duration, interleaving bool, tweak ...func(*silo.Config)) {
	const (
		senders = 8
		perSend = 2500
	)
	grains := shape.grains
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	handled := &sync.Map{}
	var overlaps atomic.Int64
	grainFor := func() soakGrain { return soakGrain{handled: handled, guard: turnGuard{overlaps: &overlaps}} }
	actTimeout := time.Duration(-1) // none
	var memLimit int64              // none
	if interleaving {
		actTimeout = 200 * time.Millisecond
		memLimit = 1000 // and memory runs short at one idle tick in three
	}
	gauge := silo.MemoryGaugeFunc(func() uint64 { return uint64(rand.IntN(3)/2) * 2000 })
	// Every tell carries something of its sender's ctx: a message that
	// reached a handler or a dead letter still wrapped would fail the
	// soakMsg assertions.
	carry := silo.PropagatorFuncs{
		ExtractFunc: func(context.Context) any { return "span" },
		InjectFunc:  func(ctx context.Context, _ any) context.Context { return ctx },
	}
	cfg := silo.Config{
		Propagator:        carry,
		MemoryLimit:       memLimit,
		MemoryGauge:       gauge,
		ActivationTimeout: actTimeout,
		Partitions:        3,
		Clock:             clk,
		IdleTimeout:       2 * time.Second,
		IdleQuantum:       100 * time.Millisecond,
		MaxActivations:    60,
		HandoffThreshold:  time.Millisecond,
		Supervision:       activation.Supervision{MaxRestarts: 2, Window: time.Second, MinBackoff: 10 * time.Millisecond, Quarantine: 300 * time.Millisecond},
		// The soak checks counts, not lines: on its racing clock the
		// sampler lets through tens of thousands, which would bury a
		// failure's own output.
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, f := range tweak {
		f(&cfg)
	}
	s := newSilo(t, cfg, func(s *silo.Silo) {
		opts := []silo.KindOption{silo.WithMaxBacklog(8, silo.RejectNewest)}
		if interleaving {
			opts = append(opts, silo.WithMayInterleave(func(msg any) bool { return msg.(soakMsg).peek }))
		}
		// "soakw" is the same grain as a stateless worker: each identity
		// has an activation per partition, Deactivate and Stop reach them
		// all, and sends choose among them by load.
		workers := append(slices.Clip(opts), silo.WithStatelessWorker(0))
		if interleaving {
			require.NoError(t, silo.Register(s, "soak", func(grain.ID) *soakHooked { return &soakHooked{grainFor()} }, opts...))
			require.NoError(t, silo.Register(s, "soakw", func(grain.ID) *soakHooked { return &soakHooked{grainFor()} }, workers...))
		} else {
			require.NoError(t, silo.Register(s, "soak", func(grain.ID) *soakGrain { g := grainFor(); return &g }, opts...))
			require.NoError(t, silo.Register(s, "soakw", func(grain.ID) *soakGrain { g := grainFor(); return &g }, workers...))
		}
	})
	dl := s.SubscribeDeadLetters(senders * perSend)
	ctx := ctxT(t)

	// Observers take one message in ten: small buffers that fill up, and
	// one closed by its reader part way through.
	var observers []grain.ID
	var readers sync.WaitGroup
	for i := range 3 {
		o, err := s.NewObserver(16)
		require.NoError(t, err)
		observers = append(observers, o.ID())
		readers.Go(func() {
			read := 0
			for n := range o.C() { // ends when the silo stops, or at the Close
				m := n.Msg.(soakMsg)
				c, _ := handled.LoadOrStore(m.id, new(atomic.Int32))
				c.(*atomic.Int32).Add(1)
				if read++; i == 0 && read == 200 {
					o.Close()
				}
			}
		})
	}

	// The clock moves on while the load runs.
	stopClock := make(chan struct{})
	clockDone := make(chan struct{})
	go func() {
		defer close(clockDone)
		for {
			select {
			case <-stopClock:
				return
			default:
				step := time.Millisecond
				if shape.jumps && rand.IntN(500) == 0 {
					step = 3 * time.Second // past the idle timeout: a burst
				}
				clk.Advance(step)
				runtimeYield()
			}
		}
	}()

	var (
		accepted   sync.Map // message id -> struct{}: sent and not refused
		refusedOvl sync.Map // refused at the call with ErrOverloaded or ErrObserverClosed: a dead letter
		nextID     atomic.Int64
		asks       atomic.Int64
		closedSeen atomic.Int64
	)
	var wg sync.WaitGroup
	shutdownAt := int64(senders * perSend * 3 / 4)
	shutdownErr := make(chan error, 1)
	for p := range senders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 7))
			for range perSend {
				id := nextID.Add(1)
				if id == shutdownAt {
					go func() {
						sctx, cancel := context.WithTimeout(ctx, shutdownDeadline)
						defer cancel()
						shutdownErr <- s.Shutdown(sctx)
					}()
				}
				m := soakMsg{id: id, panic: r.IntN(8) == 0, sleep: r.IntN(100) == 0}
				if interleaving {
					m.await, m.peek = r.IntN(10) == 0, r.IntN(3) == 0
				}
				target := grain.NewIntID("soak", int64(r.IntN(grains)))
				if shape.hot && r.IntN(3) == 0 {
					target = grain.NewIntID("soak", 0)
				}
				if r.IntN(5) == 0 { // one message in five to a stateless worker
					target = grain.NewIntID("soakw", int64(r.IntN(grains/10)))
				}
				toObserver := r.IntN(10) == 0
				if toObserver {
					target = observers[r.IntN(len(observers))]
				}
				switch r.IntN(150) { // system messages race the load too
				case 0:
					_ = s.Deactivate(ctx, target)
				case 1:
					_ = s.Stop(ctx, target)
				}
				var err error
				if r.IntN(3) == 0 && !toObserver {
					asks.Add(1)
					_, err = s.Ask(ctx, target, m) // must return: ctx is the test's 20 s
				} else {
					err = s.Tell(ctx, target, m)
				}
				switch {
				case err == nil:
					accepted.Store(id, struct{}{})
				case errors.Is(err, grain.ErrSiloClosed) && !errors.Is(err, grain.ErrDeadLetter):
					closedSeen.Add(1) // refused at the call: neither handled nor dead
				case errors.Is(err, grain.ErrOverloaded) && !errors.Is(err, grain.ErrDeadLetter),
					errors.Is(err, grain.ErrObserverClosed):
					refusedOvl.Store(id, struct{}{})
				default:
					// An ask that was accepted and then failed: handled (a
					// panic) or a dead letter. Either way it was accepted.
					accepted.Store(id, struct{}{})
				}
			}
		})
	}
	wg.Wait()
	serr := <-shutdownErr
	close(stopClock)
	<-clockDone
	require.NoError(t, s.Close())
	readers.Wait() // they have read what the observers held when the silo stopped

	dead := map[int64]int{}
	reasons := map[grain.Reason]int{}
	badCarried := 0
	for d := range dl.C {
		dead[d.Msg.(soakMsg).id]++
		reasons[d.Reason]++
		if want := any("span"); d.Ask && d.Carried != nil || !d.Ask && d.Carried != want {
			badCarried++ // a tell's dead letter keeps what it carried; an ask carries nothing
		}
	}
	assert.Zero(t, badCarried)
	require.Zero(t, dl.Dropped())

	count := func(m *sync.Map) (n int) { m.Range(func(any, any) bool { n++; return true }); return }
	problems := 0
	accepted.Range(func(k, _ any) bool {
		id := k.(int64)
		h := 0
		if v, ok := handled.Load(id); ok {
			h = int(v.(*atomic.Int32).Load())
		}
		if h+dead[id] != 1 {
			if problems < 10 {
				t.Errorf("message %d: handled %d times, dead-lettered %d times", id, h, dead[id])
			}
			problems++
		}
		return true
	})
	refusedOvl.Range(func(k, _ any) bool {
		id := k.(int64)
		_, h := handled.Load(id)
		assert.False(t, h, "refused message %d was handled", id)
		assert.Equal(t, 1, dead[id], "refused message %d is one dead letter", id)
		return true
	})
	t.Logf("accepted %d, refused overloaded %d, refused closed %d, asks %d, shutdown: %v",
		count(&accepted), count(&refusedOvl), closedSeen.Load(), asks.Load(), serr)
	t.Logf("dead letters by reason: %v; stats %+v", reasons, s.Stats())
	assert.Zero(t, problems)
	assert.Zero(t, overlaps.Load(), "turns of one activation overlapped")
	assert.Positive(t, closedSeen.Load(), "the shutdown came in the middle of the load")
	if cfg.QueueCapacity > 0 && cfg.QueueCapacity <= 8 {
		assert.Positive(t, s.Stats().QueueWaits, "senders waited for room")
	}
}
