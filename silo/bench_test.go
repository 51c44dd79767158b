package silo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

type benchGrain struct{ n int }

type benchIncr struct{}

// wideGrain is a benchGrain of a cache line, as a player's or a cart's
// state would be at least: grains as small as benchGrain share lines, and
// many of them fit in the caches.
type wideGrain struct {
	benchGrain
	_ [56]byte
}

type benchSync struct{ done chan struct{} }

// benchHold holds its turn until release is closed, after saying so on in.
type benchHold struct{ in, release chan struct{} }

var incrMsg = &benchIncr{}

func (g *benchGrain) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case *benchIncr:
		g.n++
	case *benchSync:
		close(m.done)
	case *benchHold:
		close(m.in)
		<-m.release
	case int:
		return g.n, nil
	}
	return nil, nil
}

func benchSilo(b *testing.B, cfg silo.Config) *silo.Silo {
	s, err := silo.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "b", func(grain.ID) *benchGrain { return &benchGrain{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "wide", func(grain.ID) *wideGrain { return &wideGrain{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "relay", func(grain.ID) benchRelay { return benchRelay{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "relayr", func(grain.ID) benchRelay { return benchRelay{} }, silo.WithReentrant()); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "chain", func(grain.ID) benchChain { return benchChain{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "hooked", func(grain.ID) *hookedGrain { return &hookedGrain{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "watching", func(grain.ID) *ctxWatcher { return &ctxWatcher{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "deacthooked", func(grain.ID) *deactHooked { return &deactHooked{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "saving", func(grain.ID) *savingGrain { return &savingGrain{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "blocking", func(grain.ID) *benchGrain { return &benchGrain{} }, silo.WithBlockingTurns()); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "deriving", func(grain.ID) *ctxDeriver { return &ctxDeriver{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "reentrant", func(grain.ID) *benchGrain { return &benchGrain{} }, silo.WithReentrant()); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "mayin", func(grain.ID) *benchGrain { return &benchGrain{} }, silo.WithMayInterleave(func(msg any) bool { _, ok := msg.(*benchSync); return ok })); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "forwarder", func(id grain.ID) forwarder { return forwarder{grain.NewID("b", id.Key())} },
		silo.WithReentrant()); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "bounded", func(grain.ID) *benchGrain { return &benchGrain{} },
		silo.WithMaxBacklog(1, silo.RejectNewest)); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "putoff", func(grain.ID) *putOff { return &putOff{} }); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkTell: Tell of a pointer message to an active grain.
func BenchmarkTell(b *testing.B) { benchTell(b, silo.Config{}, context.Background(), "b") }

// BenchmarkTellReentrant: the same to a grain of a reentrant kind, whose
// tell's handler gets an ownCtx, which ends with the turn: its one
// allocation.
func BenchmarkTellReentrant(b *testing.B) {
	benchTell(b, silo.Config{}, context.Background(), "reentrant")
}

// BenchmarkTellMayInterleave: the same to a grain of a WithMayInterleave
// kind, whose predicate does not take the tells: each turn holds the
// grain (holding.go), marked and unmarked in its wait shard.
func BenchmarkTellMayInterleave(b *testing.B) {
	benchTell(b, silo.Config{}, context.Background(), "mayin")
}

// forwarder is a reentrant grain whose turn tells a benchGrain on.
type forwarder struct{ to grain.ID }

func (f forwarder) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case *benchIncr:
		return nil, gc.Silo().Tell(ctx, f.to, m)
	case *benchSync:
		close(m.done)
	}
	return nil, nil
}

// BenchmarkTellReentrantTelling: a tell to a reentrant grain whose turn
// tells another grain: the handler's own tell leaves its turn's ctx to be
// reused (ownCtx.info; a call of the turn's would not), so the turn
// allocates nothing more than BenchmarkTellReentrant's.
func BenchmarkTellReentrantTelling(b *testing.B) {
	benchTell(b, silo.Config{}, context.Background(), "forwarder")
}

// BenchmarkTellBlockingKind: the same to a grain of a kind
// WithBlockingTurns, whose every turn starts off its partition: what a
// handoff a turn costs a kind whose turns in fact do not block.
func BenchmarkTellBlockingKind(b *testing.B) {
	benchTell(b, silo.Config{}, context.Background(), "blocking")
}

// BenchmarkTellCarrying: the same with a Config.Propagator that carries a
// trace id from the sender's ctx into the handler's: the message's wrapper
// and the handler's ctx (the propagator's context.WithValue) are its two
// allocations.
func BenchmarkTellCarrying(b *testing.B) {
	benchTell(b, silo.Config{Propagator: traceProp}, context.WithValue(context.Background(), traceKey{}, "trace-1"), "b")
}

// BenchmarkTellCheckedContexts: the same with Config.CheckContexts, as
// in a silotest silo: each turn's grain.Context of its own, its one
// allocation.
func BenchmarkTellCheckedContexts(b *testing.B) {
	benchTell(b, silo.Config{CheckContexts: true}, context.Background(), "b")
}

func benchTell(b *testing.B, cfg silo.Config, ctx context.Context, kind string) {
	s := benchSilo(b, cfg)
	ids := tellLoop(b, s, ctx, kind)
	b.StopTimer()
	for _, id := range ids { // wait until all were handled
		done := make(chan struct{})
		_ = s.Tell(ctx, id, &benchSync{done})
		<-done
	}
}

// tellLoop activates 64 grains of kind, then tells them in turn, timed; it
// returns their IDs.
func tellLoop(b *testing.B, s *silo.Silo, ctx context.Context, kind string) []grain.ID {
	ids := make([]grain.ID, 64)
	for i := range ids {
		ids[i] = grain.NewIntID(kind, int64(i))
		if _, err := s.Ask(ctx, ids[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := tellRetry(ctx, s, ids[i&63], incrMsg); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// BenchmarkTellSendFilter: Tell through Silo.Runtime() with one send
// filter that passes the send on: the filtered view, the filter's call and
// the recovery of its panic, against BenchmarkTell's direct send.
func BenchmarkTellSendFilter(b *testing.B) {
	pass := grain.SendFilterFunc(func(ctx context.Context, m grain.Send, next grain.SendNext) (any, error) { return next(ctx, m) })
	s := benchSilo(b, silo.Config{SendFilters: []grain.SendFilter{pass}})
	ctx := context.Background()
	rt := s.Runtime()
	ids := make([]grain.ID, 64)
	for i := range ids {
		ids[i] = grain.NewIntID("b", int64(i))
		if _, err := rt.Ask(ctx, ids[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for {
			err := rt.Tell(ctx, ids[i&63], incrMsg)
			if !errors.Is(err, grain.ErrOverloaded) {
				if err != nil {
					b.Fatal(err)
				}
				break
			}
			runtime.Gosched()
		}
	}
	b.StopTimer()
	for _, id := range ids {
		done := make(chan struct{})
		_ = s.Tell(ctx, id, &benchSync{done})
		<-done
	}
}

// BenchmarkTellManyGrains: Tell to grains drawn at random from many, more
// than the caches hold: each message's directory slot, activation record and
// grain are cold, and the owner's prefetching (partition.prefetchAhead) is
// what overlaps their misses.
func BenchmarkTellManyGrains(b *testing.B) {
	for _, n := range []int{10_000, 20_000, 50_000, 200_000} {
		b.Run(fmt.Sprintf("grains=%d", n), func(b *testing.B) {
			s := benchSilo(b, silo.Config{})
			ctx := context.Background()
			ids := make([]grain.ID, n)
			for i := range ids {
				ids[i] = grain.NewIntID("wide", int64(i))
				if err := tellRetry(ctx, s, ids[i], incrMsg); err != nil {
					b.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			keys := make([]int32, 1<<20)
			for i := range keys {
				keys[i] = int32(r.IntN(n))
			}
			syncAll(b, s, ctx, ids[:64])
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				// The ID made from its key, as a request names it: a table of
				// 200,000 IDs read at random would miss the cache in the sender.
				id := grain.NewIntID("wide", int64(keys[i&(len(keys)-1)]))
				if err := tellRetry(ctx, s, id, incrMsg); err != nil {
					b.Fatal(err)
				}
			}
			syncAll(b, s, ctx, ids[:64]) // a partition's queue is FIFO: all before are handled
		})
	}
}

// syncAll waits until each of ids has handled what was sent it before.
func syncAll(b *testing.B, s *silo.Silo, ctx context.Context, ids []grain.ID) {
	for _, id := range ids {
		if _, err := s.Ask(ctx, id, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCall: a request/reply round trip to an active grain.
func BenchmarkCall(b *testing.B) { benchCalls(b, silo.Config{}, grain.NewID("b", "x")) }

// BenchmarkCallCheckedContexts: the same with Config.CheckContexts, as in
// a silotest silo: a call from outside any turn reads its caller's stack
// for a turn made with a ctx not its own (foreignctx.go), the turn its own
// grain.Context.
func BenchmarkCallCheckedContexts(b *testing.B) {
	benchCalls(b, silo.Config{CheckContexts: true}, grain.NewID("b", "x"))
}

// benchCalls measures call round trips to id, with a deadline on the
// caller's ctx and without one (the default call timeout).
func benchCalls(b *testing.B, cfg silo.Config, id grain.ID) {
	for _, bc := range []struct {
		name     string
		deadline bool
	}{{"deadline", true}, {"default-timeout", false}} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchSilo(b, cfg)
			ctx := context.Background()
			if bc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := silo.Call[int](ctx, s, id, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallWatching: a call whose handler reads its ctx's Done, from a
// caller whose ctx has a deadline and from one whose ctx never ends (the
// default call timeout bounds it).
func BenchmarkCallWatching(b *testing.B) { benchCalls(b, silo.Config{}, grain.NewID("watching", "w")) }

// BenchmarkCallParallel: round trips from many goroutines to many grains;
// /watching when the handler reads its ctx's Done, as a handler that
// passes its ctx to a database or an HTTP client does; /deriving when it
// derives a ctx with a timeout from it.
func BenchmarkCallParallel(b *testing.B) {
	for _, kind := range []string{"b", "watching", "deriving"} {
		name := map[string]string{"b": "plain", "watching": "watching", "deriving": "deriving"}[kind]
		b.Run(name, func(b *testing.B) {
			s := benchSilo(b, silo.Config{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int64(0)
				for pb.Next() {
					i++
					if _, err := silo.Call[int](ctx, s, grain.NewIntID(kind, i&1023), 0); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// ctxDeriver is benchGrain whose turns derive a ctx with a timeout from
// theirs, as a handler that bounds a database query does.
type ctxDeriver struct{ benchGrain }

func (g *ctxDeriver) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return g.benchGrain.Receive(qctx, gc, msg)
}

// ctxWatcher is benchGrain whose turns read their ctx's Done.
type ctxWatcher struct{ benchGrain }

func (g *ctxWatcher) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	return g.benchGrain.Receive(ctx, gc, msg)
}

// BenchmarkActivate: the first message to a new grain.
func BenchmarkActivate(b *testing.B) { benchActivations(b, silo.Config{}, "b") }

// benchActivations sends one message to each of b.N new grains of kind,
// and waits for them all.
func benchActivations(b *testing.B, cfg silo.Config, kind string) {
	s := benchSilo(b, cfg)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := tellRetry(ctx, s, grain.NewIntID(kind, int64(i)), incrMsg); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	done := make(chan struct{})
	_ = s.Tell(ctx, grain.NewIntID(kind, -1), &benchSync{done})
	<-done
}

// hookedGrain is benchGrain with an OnActivate, which the silo bounds by
// Config.ActivationTimeout.
type hookedGrain struct{ benchGrain }

func (*hookedGrain) OnActivate(context.Context, *grain.Context) error { return nil }

// BenchmarkActivateWithHook: the first message to a new grain that has an
// OnActivate; /unbounded with a negative ActivationTimeout.
func BenchmarkActivateWithHook(b *testing.B) {
	for _, bc := range []struct {
		name    string
		timeout time.Duration
	}{{"bounded", 0}, {"unbounded", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			benchActivations(b, silo.Config{ActivationTimeout: bc.timeout}, "hooked")
		})
	}
}

// tellRetry treats ErrOverloaded as backpressure, as a producer should.
func tellRetry(ctx context.Context, s *silo.Silo, id grain.ID, msg any) error {
	for {
		err := s.Tell(ctx, id, msg)
		if !errors.Is(err, grain.ErrOverloaded) {
			return err
		}
		runtime.Gosched()
	}
}

// benchRelay answers by calling grain b with its turn's ctx: a call made from a
// turn.
type benchRelay struct{}

func (benchRelay) Receive(ctx context.Context, c *grain.Context, _ any) (any, error) {
	return silo.Call[int](ctx, c.Silo(), grain.NewID("b", "x"), 0)
}

// BenchmarkNestedCall: a call whose handler calls another grain.
func BenchmarkNestedCall(b *testing.B) { benchCalls(b, silo.Config{}, grain.NewID("relay", "r")) }

// BenchmarkNestedCallReentrant: the same from a grain of a reentrant kind,
// whose call is an edge of the wait-for graph too (read only while the
// grain is stopping or activating: deadlock.go).
func BenchmarkNestedCallReentrant(b *testing.B) {
	benchCalls(b, silo.Config{}, grain.NewID("relayr", "r"))
}

// benchChain n calls benchChain n-1, and benchChain 0 calls a benchGrain: a
// call chain n+1 grains deep.
type benchChain struct{}

func (benchChain) Receive(ctx context.Context, c *grain.Context, _ any) (any, error) {
	if n, _ := c.ID().IntKey(); n > 0 {
		return silo.Call[int](ctx, c.Silo(), grain.NewIntID("chain", n-1), 0)
	}
	return silo.Call[int](ctx, c.Silo(), grain.NewID("b", "x"), 0)
}

// BenchmarkCallChain: a call down a chain of grains, each calling the next
// from the turn that serves its caller's call — as a request goes through
// a service's grains.
func BenchmarkCallChain(b *testing.B) {
	for _, depth := range []int64{2, 4} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			s := benchSilo(b, silo.Config{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := silo.Call[int](ctx, s, grain.NewIntID("chain", depth-1), 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNestedCallPartitions: the same on two partitions, the relay on the
// callee's partition (its turn must let the partition go for the callee to
// run) or on the other one.
func BenchmarkNestedCallPartitions(b *testing.B) {
	pt, err := queues.NewPartitioner(2)
	if err != nil {
		b.Fatal(err)
	}
	callee := pt.Partition(grain.NewID("b", "x"))
	for _, same := range []bool{true, false} {
		b.Run(map[bool]string{true: "same", false: "other"}[same], func(b *testing.B) {
			s := benchSilo(b, silo.Config{Partitions: 2})
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			// The first relay key on the partition wanted: found, not
			// written down, so that no change to the identity hash can
			// quietly turn one case into the other.
			var relay grain.ID
			for i := 0; ; i++ {
				if relay = grain.NewIntID("relay", int64(i)); (pt.Partition(relay) == callee) == same {
					break
				}
			}
			b.ReportAllocs()
			before := s.Stats().Handoffs
			for b.Loop() {
				if _, err := silo.Call[int](ctx, s, relay, 0); err != nil {
					b.Fatal(err)
				}
			}
			// Within a partition every call hands it off; across, the
			// callee's owner on another core mostly answers while the turn
			// yields, and few do.
			b.ReportMetric(float64(s.Stats().Handoffs-before)/float64(b.N), "handoffs/op")
		})
	}
}

// callOwn calls the benchGrain of its own key: a turn that calls a grain
// of either partition.
type callOwn struct{}

func (callOwn) Receive(ctx context.Context, c *grain.Context, _ any) (any, error) {
	n, _ := c.ID().IntKey()
	return silo.Call[int](ctx, c.Silo(), grain.NewIntID("b", n), 0)
}

// BenchmarkNestedCallCrowded: 64 callers, each calling a grain of its own
// that calls another grain, per call — with 1,000 other goroutines
// runnable all the time (each yielding in a loop), as in a busy service,
// where a goroutine that yields waits for each of them to run. A turn that
// calls another partition must not yield then, holding its partition: it
// hands the partition off at once.
func BenchmarkNestedCallCrowded(b *testing.B) {
	s, err := silo.New(silo.Config{Partitions: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := silo.Register(s, "b", func(grain.ID) *benchGrain { return &benchGrain{} }); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "callown", func(grain.ID) callOwn { return callOwn{} }); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	defer silo.StartCrowd(1000)()
	var next atomic.Int64
	b.ResetTimer()
	var callers sync.WaitGroup
	for i := range 64 {
		callers.Go(func() {
			id := grain.NewIntID("callown", int64(i))
			for next.Add(1) <= int64(b.N) {
				if _, err := silo.Call[int](ctx, s, id, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	callers.Wait()
}

// BenchmarkCallBesideCPUBoundGoroutines: a Call round trip while the
// program runs two CPU-bound goroutines a P, each holding its core until
// the scheduler preempts it. A yield — the caller's before it parks, the
// owner's out of work — would wait out one of their time slices (10 ms);
// the silo sees that from a yield's length and stops yielding (yield.go).
func BenchmarkCallBesideCPUBoundGoroutines(b *testing.B) {
	s := benchSilo(b, silo.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	defer silo.StartHogs(2 * runtime.GOMAXPROCS(0))()
	id := grain.NewID("b", "x")
	for b.Loop() {
		if _, err := silo.Call[int](ctx, s, id, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// bouncer tells its peer the ball until the count runs out: a tell made
// from a turn.
type bouncer struct{ peer grain.ID }

type ball struct {
	left int
	done chan struct{}
}

func (g bouncer) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	b := msg.(*ball)
	if b.left--; b.left <= 0 {
		close(b.done)
		return nil, nil
	}
	return nil, c.Silo().Tell(ctx, g.peer, b)
}

// registerPair registers kind "bouncer" on s: grains ping and pong, each
// the other's peer. It returns ping.
func registerPair(b *testing.B, s *silo.Silo) grain.ID {
	ping, pong := grain.NewID("bouncer", "ping"), grain.NewID("bouncer", "pong")
	if err := silo.Register(s, "bouncer", func(id grain.ID) bouncer {
		if id == ping {
			return bouncer{peer: pong}
		}
		return bouncer{peer: ping}
	}); err != nil {
		b.Fatal(err)
	}
	return ping
}

// BenchmarkTellFromTurn: one hop of a ball two grains tell each other.
func BenchmarkTellFromTurn(b *testing.B) {
	s, err := silo.New(silo.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ping := registerPair(b, s)
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	bl := &ball{left: b.N, done: make(chan struct{})}
	b.ResetTimer()
	if err := s.Tell(ctx, ping, bl); err != nil {
		b.Fatal(err)
	}
	<-bl.done
}

// BenchmarkShed: the idle tick of a partition of 100,000 grains under
// memory pressure, which sheds a tenth of them — the two passes over its
// idle wheel and the choice of the grains; their deactivations run after
// it, untimed, and the grains are brought back between ticks — against
// the same tick with memory within the limit (/none).
func BenchmarkShed(b *testing.B) {
	for _, bc := range []struct {
		name string
		used uint64
	}{{"none", 0}, {"tenth", 1001}} { // 1001 against a limit of 1000: (1001-900)/1001 of the grains
		b.Run(bc.name, func(b *testing.B) { benchShed(b, bc.used) })
	}
}

func benchShed(b *testing.B, over uint64) {
	const grains = 100_000
	var used atomic.Uint64
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// An idle quantum of 100 ms: the silo then looks at memory at each
	// tick only, with no look between ticks (memlook.go). With a second's,
	// a look 100 ms into the second, the gauge still past the limit, shed a
	// second share, which went on past the loop below into the next
	// iteration's fill: that iteration found fewer grains to shed, and a
	// run of some thousand iterations failed.
	const quantum = 100 * time.Millisecond
	s, err := silo.New(silo.Config{
		Clock: clk, Partitions: 1, IdleTimeout: time.Hour, IdleQuantum: quantum,
		MemoryLimit: 1000, MemoryGauge: silo.MemoryGaugeFunc(used.Load),
	})
	if err != nil {
		b.Fatal(err)
	}
	newGrain := func(grain.ID) *benchGrain { return &benchGrain{} }
	if err := silo.Register(s, "b", newGrain); err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "pinned", newGrain, silo.WithIdleTimeout(-1)); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	barrier := func() { // handled after the tick: the owner drains control items first
		if _, err := s.Ask(ctx, grain.NewID("pinned", "barrier"), 0); err != nil {
			b.Fatal(err)
		}
	}
	fill := func() { // activates the grains shed, touches the rest
		for i := range grains {
			if err := tellRetry(ctx, s, grain.NewIntID("b", int64(i)), incrMsg); err != nil {
				b.Fatal(err)
			}
		}
		barrier()
	}
	fill()
	// The shed goes in slices after the tick, each a round of the owner:
	// barriers until it has taken all it will (the activations times the
	// share, rounded up — Silo.shedShare and partition.shed).
	want := uint64(0)
	if over > 1000 {
		ppm := (over-900)*1_000_000/over + 1
		want = ((grains+1)*ppm + 999_999) / 1_000_000
	}
	b.ReportAllocs()
	for b.Loop() {
		used.Store(over)
		target := s.Stats().Shed + want
		clk.Advance(quantum)
		barrier()
		for rounds := 0; s.Stats().Shed < target; rounds++ {
			if rounds == 10_000 {
				b.Fatalf("shed %d, want %d", s.Stats().Shed, target)
			}
			barrier()
		}
		b.StopTimer()
		used.Store(0)
		fill()
		b.StartTimer()
	}
	b.ReportMetric(float64(s.Stats().Shed)/float64(b.N), "shed/op")
}

// spinFor is a stateless turn's work: d of CPU.
type spinFor time.Duration

// BenchmarkStatelessWorker: calls from many goroutines to one identity
// whose turn takes 20 µs of CPU — an ordinary kind (one activation, one
// turn at a time) against a stateless worker with one activation per
// partition. The ratio is the parallelism the option buys: up to the
// partitions (GOMAXPROCS).
func BenchmarkStatelessWorker(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []silo.KindOption
	}{{"single", nil}, {"workers", []silo.KindOption{silo.WithStatelessWorker(0)}}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := silo.New(silo.Config{})
			if err != nil {
				b.Fatal(err)
			}
			spin := func(_ context.Context, _ *grain.Context, msg any) (any, error) {
				busyWork(time.Duration(msg.(spinFor)))
				return nil, nil
			}
			if err := silo.Register(s, "w", func(grain.ID) grain.Func { return spin }, c.opts...); err != nil {
				b.Fatal(err)
			}
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			id := grain.NewID("w", "pricer")
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Ask(ctx, id, spinFor(20*time.Microsecond)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkTellObserver: a tell to an observer, and its receipt by a
// reader on another goroutine, against BenchmarkTell's tell to a grain.
func BenchmarkTellObserver(b *testing.B) {
	s := benchSilo(b, silo.Config{})
	o, err := s.NewObserver(1024)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan int)
	go func() {
		n := 0
		for range o.C() {
			n++
		}
		done <- n
	}()
	ctx := context.Background()
	b.ReportAllocs()
	sent := 0
	for b.Loop() {
		for {
			err := s.Tell(ctx, o.ID(), incrMsg)
			if err == nil {
				break
			}
			if !errors.Is(err, grain.ErrOverloaded) {
				b.Fatal(err)
			}
			runtime.Gosched() // the reader is behind: let it catch up
		}
		sent++
	}
	b.StopTimer()
	o.Close()
	if got, left := <-done, int(s.Stats().DeadLetters[grain.ReasonObserverClosed]); got+left != sent {
		b.Fatalf("received %d and %d left unread of %d", got, left, sent)
	}
}

type failingGrain struct{ panics bool }

var errBenchFail = errors.New("bench: refused")

func (g failingGrain) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if m, ok := msg.(*benchSync); ok {
		close(m.done)
		return nil, nil
	}
	if g.panics {
		panic(errBenchFail)
	}
	return nil, errBenchFail
}

// BenchmarkTellFailing: tells whose handler returns an error (/error) or
// panics (/panic, resumed by its kind's Decider, so that every tell
// panics), each one a failed tell the silo counts and logs (through a JSON
// handler writing to io.Discard), until the last has been handled: what a
// storm of failing tells costs the partitions.
func BenchmarkTellFailing(b *testing.B) {
	for _, panics := range []bool{false, true} {
		b.Run(map[bool]string{false: "error", true: "panic"}[panics], func(b *testing.B) {
			benchTellFailing(b, panics)
		})
	}
}

func benchTellFailing(b *testing.B, panics bool) {
	ctx := context.Background()
	s, err := silo.New(silo.Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	resume := activation.Supervision{Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive {
		return activation.Resume
	})}
	if err := silo.Register(s, "failing", func(grain.ID) failingGrain { return failingGrain{panics} },
		silo.WithSupervision(resume)); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ids := make([]grain.ID, 64)
	for i := range ids {
		ids[i] = grain.NewIntID("failing", int64(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := tellRetry(ctx, s, ids[i&63], incrMsg); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids { // until all were handled
		done := make(chan struct{})
		if err := s.Tell(ctx, id, &benchSync{done}); err != nil {
			b.Fatal(err)
		}
		<-done
	}
}

// deactHooked is benchGrain with an OnDeactivate that does nothing: what the
// silo pays to run a hook, with none of the hook's own work.
type deactHooked struct{ benchGrain }

func (*deactHooked) OnDeactivate(context.Context, *grain.Context) error { return nil }

// savingGrain saves its state as it goes, with a blocking call of a
// millisecond: a database's round trip.
type savingGrain struct{ benchGrain }

func (*savingGrain) OnDeactivate(context.Context, *grain.Context) error {
	time.Sleep(time.Millisecond) // the store's latency: the workload, not a wait for something
	return nil
}

// BenchmarkShutdownDeactivates: a graceful Shutdown of b.N active grains,
// per grain; /hooked when their kind has an OnDeactivate, which each
// deactivation runs as a turn with a ctx bounded by DeactivationTimeout;
// /saving when the hook blocks for a millisecond, which runs side by side
// with the others' (blocking.go; one after another, 1 ms or more each).
func BenchmarkShutdownDeactivates(b *testing.B) {
	for _, kind := range []string{"b", "deacthooked", "saving"} {
		name := map[string]string{"b": "plain", "deacthooked": "hooked", "saving": "saving"}[kind]
		b.Run(name, func(b *testing.B) {
			s := benchSilo(b, silo.Config{})
			ctx := context.Background()
			for i := range b.N {
				if err := tellRetry(ctx, s, grain.NewIntID(kind, int64(i)), incrMsg); err != nil {
					b.Fatal(err)
				}
			}
			done := make(chan struct{})
			_ = s.Tell(ctx, grain.NewIntID(kind, -1), &benchSync{done})
			<-done
			b.ReportAllocs()
			b.ResetTimer()
			if err := s.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if got, want := s.Stats().Deactivations[grain.DeactivationShutdown], uint64(b.N+1); got != want {
				b.Fatalf("%d grains deactivated at the shutdown, want %d", got, want)
			}
		})
	}
}

// BenchmarkTellOverloaded: a tell refused at once because its grain's
// backlog is full (WithMaxBacklog, RejectNewest) — what a producer pays
// while a hot grain sheds load.
func BenchmarkTellOverloaded(b *testing.B) {
	s := benchSilo(b, silo.Config{})
	ctx := context.Background()
	id := overload(b, s, ctx)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Tell(ctx, id, incrMsg); !errors.Is(err, grain.ErrOverloaded) {
			b.Fatalf("Tell = %v, want ErrOverloaded", err)
		}
	}
}

// BenchmarkTellBesideOverloaded: BenchmarkTell on one partition, alone and
// while another grain of the partition is overloaded (its backlog full):
// every send to the partition then asks whether its target is that grain.
func BenchmarkTellBesideOverloaded(b *testing.B) {
	for _, overloaded := range []bool{false, true} {
		b.Run(map[bool]string{false: "alone", true: "beside"}[overloaded], func(b *testing.B) {
			s := benchSilo(b, silo.Config{Partitions: 1})
			ctx := context.Background()
			if overloaded {
				overload(b, s, ctx)
			}
			tellLoop(b, s, ctx, "b")
		})
	}
}

// overload holds a grain of kind bounded (a backlog of one, RejectNewest)
// in a turn until the benchmark ends, and fills its backlog until it
// refuses tells; it returns the grain's ID.
func overload(b *testing.B, s *silo.Silo, ctx context.Context) grain.ID {
	id := grain.NewID("bounded", "hot")
	h := &benchHold{in: make(chan struct{}), release: make(chan struct{})}
	b.Cleanup(func() { close(h.release) })
	if err := s.Tell(ctx, id, h); err != nil {
		b.Fatal(err)
	}
	<-h.in
	for !errors.Is(s.Tell(ctx, id, incrMsg), grain.ErrOverloaded) {
		runtime.Gosched()
	}
	return id
}

// BenchmarkTellFromTurnRing: BenchmarkTellFromTurn around a ring of grains
// on one partition: each hop a tell from another sender.
func BenchmarkTellFromTurnRing(b *testing.B) {
	for _, n := range []int64{2, 64, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := silo.New(silo.Config{Partitions: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := silo.Register(s, "ringer", func(id grain.ID) bouncer { // its peer: the ring's next
				k, _ := id.IntKey()
				return bouncer{peer: grain.NewIntID("ringer", (k+1)%n)}
			}); err != nil {
				b.Fatal(err)
			}
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			warm := &ball{left: int(2 * n), done: make(chan struct{})} // every grain active
			if err := s.Tell(ctx, grain.NewIntID("ringer", 0), warm); err != nil {
				b.Fatal(err)
			}
			<-warm.done
			b.ReportAllocs()
			bl := &ball{left: b.N, done: make(chan struct{})}
			b.ResetTimer()
			if err := s.Tell(ctx, grain.NewIntID("ringer", 0), bl); err != nil {
				b.Fatal(err)
			}
			<-bl.done
		})
	}
}
