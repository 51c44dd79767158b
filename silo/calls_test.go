package silo_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// hop asks the grain to call the first grain of Path with the rest of it,
// and reply with the keys it went through.
type hop struct {
	Path      []grain.ID
	Reentrant bool // make the call allowing call-chain reentrancy
}

// relay forwards hops and counts its turns, flagging any overlap.
type relay struct{ guard turnGuard }

func (r *relay) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	r.guard.enter()
	defer r.guard.leave()
	switch m := msg.(type) {
	case hop:
		if len(m.Path) == 0 {
			return c.ID().Key(), nil
		}
		cctx := ctx
		if m.Reentrant {
			cctx = silo.AllowCallChainReentrancy(ctx)
		}
		// The nested turn may run while this one waits: give up the flag
		// for the duration of the call, as the turn token is given up.
		r.guard.leave()
		rest, err := silo.Call[string](cctx, c.Silo(), m.Path[0], hop{Path: m.Path[1:], Reentrant: m.Reentrant})
		r.guard.enter()
		if err != nil {
			return nil, err
		}
		return c.ID().Key() + ">" + rest, nil
	case deepWait:
		if len(m.Path) == 0 {
			close(m.Started)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return silo.Call[string](ctx, c.Silo(), m.Path[0], deepWait{Path: m.Path[1:], Started: m.Started})
	}
	return nil, fmt.Errorf("relay: %T", msg)
}

func relaySilo(t *testing.T, cfg silo.Config, opts ...silo.KindOption) (*silo.Silo, *atomic.Int64) {
	var overlaps atomic.Int64
	s := newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) *relay { return &relay{guard: turnGuard{overlaps: &overlaps}} }, opts...))
		require.NoError(t, silo.Register(s, "reentrant", func(grain.ID) *relay { return &relay{guard: turnGuard{overlaps: &overlaps}} },
			append(opts, silo.WithReentrant())...))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	return s, &overlaps
}

func r(key string) grain.ID { return grain.NewID("relay", key) }

func TestCallsBetweenGrainsOfOnePartition(t *testing.T) {
	s, overlaps := relaySilo(t, silo.Config{Partitions: 1})
	ctx := ctxT(t)
	got, err := silo.Call[string](ctx, s, r("a"), hop{Path: []grain.ID{r("b"), r("c"), r("d")}})
	require.NoError(t, err)
	assert.Equal(t, "a>b>c>d", got)
	assert.Zero(t, overlaps.Load())
}

func TestCallCyclesFailFast(t *testing.T) {
	s, _ := relaySilo(t, silo.Config{Partitions: 2})
	ctx := ctxT(t)
	cases := []struct {
		name  string
		start grain.ID
		path  []grain.ID
		chain string
	}{
		{"A->A", r("a"), []grain.ID{r("a")}, "relay/a -> relay/a"},
		{"A->B->A", r("a"), []grain.ID{r("b"), r("a")}, "relay/a -> relay/b -> relay/a"},
		{"A->B->C->A", r("a"), []grain.ID{r("b"), r("c"), r("a")}, "relay/a -> relay/b -> relay/c -> relay/a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := silo.Call[string](ctx, s, c.start, hop{Path: c.path})
			require.ErrorIs(t, err, grain.ErrCallCycle)
			var ce *grain.CallCycleError
			require.ErrorAs(t, err, &ce)
			parts := make([]string, len(ce.Chain))
			for i, id := range ce.Chain {
				parts[i] = id.String()
			}
			assert.Equal(t, c.chain, strings.Join(parts, " -> "))
			assert.Less(t, time.Since(start), 5*time.Second, "fails fast, not at the call timeout")
		})
	}
	// A chain that revisits no grain is no cycle.
	got, err := silo.Call[string](ctx, s, r("a"), hop{Path: []grain.ID{r("b"), r("c")}})
	require.NoError(t, err)
	assert.Equal(t, "a>b>c", got)
}

func TestCallChainReentrancySucceeds(t *testing.T) {
	s, overlaps := relaySilo(t, silo.Config{Partitions: 2})
	ctx := ctxT(t)
	for _, path := range [][]grain.ID{
		{r("a")},
		{r("b"), r("a")},
		{r("b"), r("c"), r("a")},
		{r("b"), r("c"), r("a"), r("b"), r("a")},
	} {
		got, err := silo.Call[string](ctx, s, r("a"), hop{Path: path, Reentrant: true})
		require.NoError(t, err, "path %v", path)
		assert.True(t, strings.HasPrefix(got, "a>"), got)
	}
	// Reentrant kinds need no per-call opt-in.
	re := func(k string) grain.ID { return grain.NewID("reentrant", k) }
	got, err := silo.Call[string](ctx, s, re("x"), hop{Path: []grain.ID{re("y"), re("x")}})
	require.NoError(t, err)
	assert.Equal(t, "x>y>x", got)
	assert.Zero(t, overlaps.Load(), "interleaved turns never ran at the same time")
}

func TestCancellationReachesThreeCallsDeep(t *testing.T) {
	s, _ := relaySilo(t, silo.Config{Partitions: 2})
	ctx := ctxT(t)
	// p -> q -> w, and w waits on its ctx.
	deep := make(chan struct{})
	cctx2, cancel2 := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := s.Ask(cctx2, grain.NewID("relay", "p"), deepWait{Path: []grain.ID{r("q"), r("w")}, Started: deep})
		res <- err
	}()
	<-deep // the handler three calls deep is waiting on its ctx
	cancel2()
	require.ErrorIs(t, <-res, context.Canceled)
}

// deepWait travels Path like a hop, then the last grain waits on its ctx.
type deepWait struct {
	Path    []grain.ID
	Started chan struct{}
}

func TestBlockedGrainDoesNotStallItsPartition(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1}, nil) // one partition: every grain shares it
	ctx := ctxT(t)
	blocked := grain.NewID("counter", "blocked")
	gate := make(chan struct{})
	require.NoError(t, s.Tell(ctx, blocked, block{gate}))
	for i := range 5 {
		require.NoError(t, s.Tell(ctx, blocked, incr{i + 1})) // wait behind the block, in order
	}
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			n, err := silo.Call[int](ctx, s, grain.NewIntID("counter", int64(i)), incr{1})
			assert.NoError(t, err)
			assert.Equal(t, 1, n)
		})
	}
	wg.Wait() // all handled while the grain is still blocked
	close(gate)
	n, err := silo.Call[int](ctx, s, blocked, get{})
	require.NoError(t, err)
	assert.Equal(t, 15, n)
	assert.Positive(t, s.Stats().Handoffs)
}

// orderGrain records the order its messages ran in.
type orderGrain struct{ seen []int }

func (o *orderGrain) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case block:
		select {
		case <-m.until:
		case <-ctx.Done():
		}
	case int:
		o.seen = append(o.seen, m)
	case get:
		return append([]int(nil), o.seen...), nil
	}
	return nil, nil
}

func TestBlockedGrainsLaterMessagesRunInOrder(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "order", func(grain.ID) *orderGrain { return &orderGrain{} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("order", "x")
	gate := make(chan struct{})
	require.NoError(t, s.Tell(ctx, id, block{gate}))
	for i := range 100 {
		require.NoError(t, s.Tell(ctx, id, i))
	}
	waitBacklog(t, s, 100)
	close(gate)
	seen, err := silo.Call[[]int](ctx, s, id, get{})
	require.NoError(t, err)
	want := make([]int, 100)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, seen)
}

// ticker is a grain that starts timers and checks ticks never overlap turns.
type ticker struct {
	guard turnGuard
	ticks chan<- string
	j     *journal
}

type (
	startTimer struct {
		name        string
		due, period time.Duration
	}
	stopTimer struct{ name string }
	tickMsg   struct{ name string }
	gateMsg   struct{ until, started chan struct{} }
)

func (k *ticker) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	k.guard.enter()
	defer k.guard.leave()
	switch m := msg.(type) {
	case startTimer:
		return nil, c.StartTimer(m.name, m.due, m.period, tickMsg{m.name})
	case stopTimer:
		c.StopTimer(m.name)
	case tickMsg:
		_, fromGrain := c.Sender()
		if fromGrain {
			return nil, fmt.Errorf("a tick has no sender")
		}
		k.ticks <- m.name
	case block:
		select {
		case <-m.until:
		case <-ctx.Done():
		}
	case gateMsg:
		close(m.started)
		select {
		case <-m.until:
		case <-ctx.Done():
		}
	case deactivate:
		c.DeactivateOnIdle()
	}
	return nil, nil
}

func (k *ticker) OnDeactivate(context.Context, *grain.Context) error {
	k.j.add("deactivated")
	k.j.deact <- "ticker"
	return nil
}

func TestTimers(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ticks := make(chan string, 100)
	var overlaps atomic.Int64
	j := newJournal()
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: time.Minute, IdleQuantum: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ticker", func(grain.ID) *ticker { return &ticker{guard: turnGuard{overlaps: &overlaps}, ticks: ticks, j: j} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("ticker", "t")
	call := func(m any) {
		t.Helper()
		_, err := s.Ask(ctx, id, m)
		require.NoError(t, err)
	}
	call(startTimer{"once", time.Second, 0})
	call(startTimer{"every", 2 * time.Second, 5 * time.Second})
	_, err := s.Ask(ctx, id, startTimer{"bad", -time.Second, 0})
	require.ErrorIs(t, err, grain.ErrInvalidConfig)

	// After each tick, an ask to the grain is a barrier: it runs after the
	// tick's turn has finished, and so after the next tick is scheduled.
	clk.Advance(time.Second)
	assert.Equal(t, "once", <-ticks)
	call(get{})
	clk.Advance(time.Second)
	assert.Equal(t, "every", <-ticks)
	call(get{})

	// A tick that falls due while a turn runs waits for it.
	gate, running := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Tell(ctx, id, gateMsg{gate, running}))
	<-running
	clk.Advance(5 * time.Second)
	waitBacklog(t, s, 1)
	select {
	case <-ticks:
		t.Fatal("tick ran during a turn")
	default:
	}
	close(gate)
	assert.Equal(t, "every", <-ticks)
	call(stopTimer{"every"})
	clk.Advance(5 * time.Second)
	clk.Advance(time.Minute - time.Second) // ticks do not keep the grain alive
	call(get{})                            // a barrier: every tick due has been queued before it
	assert.Zero(t, overlaps.Load())
	select {
	case n := <-ticks:
		t.Fatalf("stopped timer ticked: %s", n)
	default:
	}
}

func TestTimersStopOnDeactivationAndDoNotKeepAlive(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ticks := make(chan string, 100)
	var overlaps atomic.Int64
	j := newJournal()
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: 10 * time.Second, IdleQuantum: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ticker", func(grain.ID) *ticker { return &ticker{guard: turnGuard{overlaps: &overlaps}, ticks: ticks, j: j} }))
		require.NoError(t, silo.Register(s, "alive", func(grain.ID) *ticker { return &ticker{guard: turnGuard{overlaps: &overlaps}, ticks: ticks, j: j} },
			silo.WithTimerKeepAlive()))
	})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("ticker", "t"), startTimer{"every", time.Second, time.Second})
	require.NoError(t, err)
	_, err = s.Ask(ctx, grain.NewID("alive", "t"), startTimer{"keep", time.Second, time.Second})
	require.NoError(t, err)
	// An ask after each step is a barrier: the ticks due have run and the
	// next ones are scheduled.
	step := func() {
		clk.Advance(time.Second)
		_, err := s.Ask(ctx, grain.NewID("alive", "t"), get{})
		require.NoError(t, err)
	}
	for range 12 {
		step()
	}
	assert.Equal(t, "ticker", <-j.deact, "ticks did not keep it alive")
	for len(ticks) > 0 {
		<-ticks
	}
	for range 30 {
		step()
	}
	assert.Len(t, ticks, 30, "only the keep-alive grain still ticks, once a second")
	for len(ticks) > 0 {
		assert.Equal(t, "keep", <-ticks)
	}
	assert.Equal(t, 1, s.Stats().Activations["alive"])
	assert.Equal(t, 0, s.Stats().Activations["ticker"])
}

// lateTimer starts a timer from OnDeactivate, as code saving state on its
// way out might ("retry the save in a second").
type lateTimer struct{ got chan error }

func (lateTimer) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }
func (g lateTimer) OnDeactivate(_ context.Context, gc *grain.Context) error {
	g.got <- gc.StartTimer("retry", time.Second, 0, "retry")
	return nil
}

// A timer started from OnDeactivate would never fire — timers stop with the
// grain — so it is refused, not taken and dropped.
func TestATimerStartedInOnDeactivateIsRefused(t *testing.T) {
	got := make(chan error, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "late", func(grain.ID) lateTimer { return lateTimer{got} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("late", "a")
	_, err := s.Ask(ctx, id, "hi")
	require.NoError(t, err)
	require.NoError(t, s.Deactivate(ctx, id))
	require.ErrorIs(t, <-got, grain.ErrDeactivating)
	// The next instance is a fresh one, whose timers work.
	_, err = s.Ask(ctx, id, "hi")
	require.NoError(t, err)
}

// keeper hands its turn's ctx to whoever asks, as a handler that starts a
// goroutine with it would.
type keeper struct{ kept chan context.Context }

func (k keeper) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	k.kept <- ctx
	return nil, nil
}

// A call's handler ctx ends with its turn, as an http.Request's context ends
// with ServeHTTP: one kept past the turn is done and Canceled, and a send
// with it fails at once instead of passing for a send from the turn.
func TestACallsCtxEndsWithItsTurn(t *testing.T) {
	kept := make(chan context.Context, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "keeper", func(grain.ID) keeper { return keeper{kept} }))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("keeper", "a"), "keep")
	require.NoError(t, err)
	old := <-kept
	<-old.Done()
	require.ErrorIs(t, old.Err(), context.Canceled)
	derived, cancel := context.WithCancel(old)
	defer cancel()
	<-derived.Done()
	requireNothingSentWith(t, s, ctx, old)
}

// keptTellCtx tells the grain "keeper/a" (a keeper) and returns the ctx its
// turn handed to kept, once that turn is over (an ask after it has its
// reply).
func keptTellCtx(t *testing.T, s *silo.Silo, ctx context.Context, kept chan context.Context) context.Context {
	t.Helper()
	require.NoError(t, s.Tell(ctx, grain.NewID("keeper", "a"), "keep"))
	old := <-kept
	_, err := s.Ask(ctx, grain.NewID("keeper", "a"), "barrier")
	require.NoError(t, err)
	<-kept
	return old
}

// requireNothingSentWith checks that sends made with old, the ctx of a
// turn that is over, fail at once with context.Canceled and reach no
// grain (a counter of the silo, "counter/b").
func requireNothingSentWith(t *testing.T, s *silo.Silo, ctx, old context.Context) {
	t.Helper()
	require.ErrorIs(t, old.Err(), context.Canceled)
	require.ErrorIs(t, s.Tell(old, grain.NewID("counter", "b"), incr{1}), context.Canceled)
	_, err := s.Ask(old, grain.NewID("counter", "b"), get{})
	require.ErrorIs(t, err, context.Canceled)
	n, err := silo.Call[int](ctx, s, grain.NewID("counter", "b"), get{})
	require.NoError(t, err)
	assert.Zero(t, n, "nothing was sent with the ended ctx")
}

// The same for a tell's turn of a kind whose turns interleave (reentrant,
// or WithMayInterleave): its handler's ctx (an ownCtx) ends with the turn.
// A goroutine that kept the worker's reused ctx passed for whatever turn
// the worker ran next, and its calls, giving up that turn's token and
// taking it back, could leave the grain waiting for it for ever (found by
// a scratch probe: four goroutines calling through a reentrant grain's
// kept ctx hung one run in three). A plain kind's tell keeps the worker's
// ctx, which costs no allocation: there the misuse only misattributes its
// calls.
func TestATellsCtxEndsWithItsTurnWhereTurnsInterleave(t *testing.T) {
	for _, opt := range []struct {
		name string
		opt  silo.KindOption
	}{
		{"reentrant", silo.WithReentrant()},
		{"may interleave", silo.WithMayInterleave(func(any) bool { return true })},
	} {
		t.Run(opt.name, func(t *testing.T) {
			kept := make(chan context.Context, 1)
			s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "keeper", func(grain.ID) keeper { return keeper{kept} }, opt.opt))
				require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
			})
			ctx := ctxT(t)
			old := keptTellCtx(t, s, ctx, kept)
			select {
			case <-old.Done():
			default:
				t.Fatal("the kept ctx is not done after its turn")
			}
			requireNothingSentWith(t, s, ctx, old)
		})
	}
}

// blockedR is a reentrant grain whose "gate" turn blocks (not in a call: no
// message may interleave with it) until gate is closed; "hello" answers
// whether it ran while the gate turn was under way.
type blockedR struct {
	in            bool
	entered, gate chan struct{}
}

func (g *blockedR) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch msg {
	case "gate":
		g.in = true
		close(g.entered)
		<-g.gate
		g.in = false
	case "hello":
		return g.in, nil
	}
	return nil, nil
}

// A plain kind's tell ctx kept past its turn is the worker's, reused for
// the worker's later plain tells; the tells of kinds whose turns interleave
// have a ctx of their own on the worker (worker.itc), so the kept one
// never passes for one of their turns. It did: a call made with it while
// the worker ran a reentrant grain's blocked tell was taken for that
// turn's call, and the grain let its own message in beside the blocked
// turn — two of its turns at once.
func TestAPlainTellsKeptCtxIsNoInterleavingTurn(t *testing.T) {
	kept := make(chan context.Context, 2)
	g := &blockedR{entered: make(chan struct{}), gate: make(chan struct{})}
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "keeper", func(grain.ID) keeper { return keeper{kept} }))
		require.NoError(t, silo.Register(s, "gated", func(grain.ID) *blockedR { return g }, silo.WithReentrant()))
	})
	ctx := ctxT(t)
	old := keptTellCtx(t, s, ctx, kept)

	release := sync.OnceFunc(func() { close(g.gate) })
	t.Cleanup(release)
	id := grain.NewID("gated", "g")
	require.NoError(t, s.Tell(ctx, id, "gate")) // a tell's turn on the same worker
	<-g.entered
	got := make(chan bool, 1)
	go func() {
		in, err := silo.Call[bool](old, s, id, "hello")
		assert.NoError(t, err)
		got <- in
	}()
	waitBacklog(t, s, 1) // it waits for the gate turn, as any message would
	release()
	assert.False(t, <-got, "hello ran beside the blocked gate turn")
}

// hookKeeper hands the ctx of its OnActivate to kept, and awaits on
// "await" (giving up its turn token and taking it back).
type hookKeeper struct{ kept chan context.Context }

func (g hookKeeper) OnActivate(ctx context.Context, _ *grain.Context) error {
	g.kept <- ctx
	return nil
}

func (g hookKeeper) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "await" {
		return "awaited", silo.Await(ctx, func() error { return nil })
	}
	return nil, nil
}

// An OnActivate's ctx is its own and ends with the hook: a goroutine the
// hook started that keeps it — to watch a subscription, say — finds it
// done, and its calls fail at once. They passed for the hook's turn: in a
// reentrant grain each gave up the turn token and took it back after, for
// a turn that never gave it up again, and the grain's next turn to wait
// (an Await) waited for the token for ever (a scratch probe hung so every
// time; on the old code this test finds the kept ctx not done).
func TestAHooksCtxEndsWithTheHook(t *testing.T) {
	kept := make(chan context.Context, 1)
	s := newSilo(t, silo.Config{CallTimeout: 5 * time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hooked", func(grain.ID) hookKeeper { return hookKeeper{kept} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("hooked", "h")
	_, err := s.Ask(ctx, id, "hello") // activates it
	require.NoError(t, err)
	old := <-kept
	select {
	case <-old.Done():
	default:
		t.Fatal("the hook's ctx is not done after the hook")
	}
	requireNothingSentWith(t, s, ctx, old)
	v, err := silo.Call[string](ctx, s, id, "await")
	require.NoError(t, err, "the grain's turn token is free")
	assert.Equal(t, "awaited", v)
}

// gateCall is a call that tells reached when it reaches the gate grain,
// which answers it once release is closed.
type gateCall struct{ reached, release chan struct{} }

// spawner is a reentrant grain whose gateCall turn starts a goroutine that
// makes the call, to the grain "gate/g", with the turn's ctx, and returns
// once the call is out — without waiting for it (the misuse docs/calls.md
// warns of); "await" waits in silo.Await, giving up the turn token and
// taking it back.
type spawner struct{ s **silo.Silo }

func (g spawner) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case gateCall:
		go func() { _, _ = (*g.s).Ask(ctx, grain.NewID("gate", "g"), m) }()
		<-m.reached
	case string:
		return "awaited", silo.Await(ctx, func() error { return nil })
	}
	return nil, nil
}

// A call a goroutine of an ask's turn still has out when the turn ends
// takes nothing back for the turn: it ended with its ctx (an ask's is never
// reused), so the call, done too, gives the turn token up instead of
// holding it for a turn that is gone — which left the reentrant grain's
// next Await waiting for it for ever (a scratch probe hung one run in
// three; the call started before the turn's end, so ending the ctx alone
// did not do).
func TestACallStillOutWhenItsTurnEndsTakesNoTokenBack(t *testing.T) {
	// An ask's turn (its ctx never reused), and a tell's (the worker's,
	// which the turn leaves to the call: the worker takes another).
	for _, tell := range []bool{false, true} {
		t.Run(map[bool]string{false: "ask", true: "tell"}[tell], func(t *testing.T) {
			callStillOut(t, tell)
		})
	}
}

func callStillOut(t *testing.T, tell bool) {
	var s *silo.Silo
	s = newSilo(t, silo.Config{}, func(s2 *silo.Silo) {
		require.NoError(t, silo.Register(s2, "spawner", func(grain.ID) spawner { return spawner{&s} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s2, "gate", func(grain.ID) grain.Func {
			return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
				m := msg.(gateCall)
				close(m.reached)
				<-m.release
				return nil, nil
			}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("spawner", "s")
	_, err := s.Ask(ctx, id, struct{}{}) // active
	require.NoError(t, err)
	call := gateCall{reached: make(chan struct{}), release: make(chan struct{})}
	if tell {
		handled := s.Stats().Handled
		require.NoError(t, s.Tell(ctx, id, call))
		require.Eventually(t, func() bool { return s.Stats().Handled > handled }, 10*time.Second, 100*time.Microsecond)
	} else {
		_, err = s.Ask(ctx, id, call)
		require.NoError(t, err)
	}
	// The turn is over, its goroutine's call still out.
	close(call.release)
	actx, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds a failing test
	defer cancel()
	v, err := silo.Call[string](actx, s, id, "await")
	require.NoError(t, err, "the grain's turn token is free")
	assert.Equal(t, "awaited", v)
}

// racer's "go" starts a goroutine that asks echo/e with the turn's ctx, and
// returns once echo has the call, which echo answers at once: the call
// ends about as the turn does, one a moment before or after the other.
// "await" takes the turn token.
type racer struct{ s **silo.Silo }

func (g racer) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "await" {
		return "awaited", silo.Await(ctx, func() error { return nil })
	}
	reached := make(chan struct{})
	go func() { _, _ = (*g.s).Ask(ctx, grain.NewID("echo", "e"), reached) }()
	if msg == "go" {
		<-reached // the call is out as the turn ends
	} // else ("late") it begins as the turn ends
	return nil, nil
}

// A call of a goroutine of the turn that ends just as the turn does —
// taking the turn token back while the turn's end looks whether a call is
// still out — or begins just as it does, leaves the token free, for a
// tell's turn as for an ask's, and no call is taken for the next turn's.
// (A tell's turn read its calls without the lock they take: it found none
// out as the call was taking the token back, kept its ctx for the next
// turn, whose start wiped the taking, and the token stayed held by no turn:
// the grain's next turn to wait for it waited for ever — the chaos program,
// with turns that fan out and take their first reply, stuck a reentrant
// grain for good in one run of two.)
func TestACallEndingAsItsTurnEndsLeavesTheTokenFree(t *testing.T) {
	var s *silo.Silo
	s = newSilo(t, silo.Config{}, func(s2 *silo.Silo) {
		require.NoError(t, silo.Register(s2, "racer", func(grain.ID) racer { return racer{&s} }, silo.WithReentrant()))
		require.NoError(t, silo.Register(s2, "echo", func(grain.ID) grain.Func {
			return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
				close(msg.(chan struct{}))
				return "hi", nil
			}
		}))
	})
	ctx := ctxT(t)
	for i := range 200 {
		id := grain.NewIntID("racer", int64(i%4))
		msg := []string{"go", "late"}[i/2%2]
		for range 50 {
			if i%2 == 0 {
				require.NoError(t, s.Tell(ctx, id, msg))
			} else {
				_, err := s.Ask(ctx, id, msg)
				require.NoError(t, err)
			}
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds a failing test
		v, err := silo.Call[string](actx, s, id, "await")
		cancel()
		require.NoError(t, err, "round %d: the grain's turn token is free", i)
		require.Equal(t, "awaited", v)
	}
}
