package silo_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A session grain: it counts, autosaves on a timer, and reports its
// deactivation.
type session struct {
	n     int
	saved chan<- int // each saveTick, with what it saved
	gone  chan<- int // at deactivation, with the final count
}

type (
	touch    struct{}
	peek     struct{}
	saveTick struct{}
)

func (g *session) OnActivate(_ context.Context, c *grain.Context) error {
	return c.StartTimer("autosave", time.Minute, time.Minute, saveTick{})
}

func (g *session) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch msg.(type) {
	case touch:
		g.n++
		return g.n, nil
	case peek:
		return g.n, nil
	case saveTick:
		g.saved <- g.n
	}
	return nil, nil
}

func (g *session) OnDeactivate(context.Context, *grain.Context) error {
	g.gone <- g.n
	return nil
}

// Timers and idle deactivation run on the silo's clock: a test passes a
// manual one and moves it. Timer ticks do not keep a grain active (unless
// the kind says silo.WithTimerKeepAlive), so it goes after its idle timeout.
func Example_timersAndIdleDeactivation() {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, _ := silo.New(silo.Config{Clock: clk, IdleTimeout: 5 * time.Minute, IdleQuantum: time.Second})
	saved, gone := make(chan int, 10), make(chan int, 1)
	_ = silo.Register(s, "session", func(grain.ID) *session { return &session{saved: saved, gone: gone} })
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	id := grain.NewID("session", "s1")
	for range 3 {
		_, _ = silo.Call[int](ctx, s, id, touch{})
	}
	for range 2 {
		clk.Advance(time.Minute)
		fmt.Println("autosaved", <-saved)
		// A call is a barrier: the tick's turn has finished, so its next
		// tick is due a minute from now, before the clock moves again.
		_, _ = silo.Call[int](ctx, s, id, peek{})
	}
	clk.Advance(6 * time.Minute) // idle for more than five minutes by now
	fmt.Println("deactivated with", <-gone)
	n, _ := silo.Call[int](ctx, s, id, touch{})
	fmt.Println("a fresh instance counts", n)
	// Output:
	// autosaved 3
	// autosaved 3
	// deactivated with 3
	// a fresh instance counts 1
}

// A notes grain saves a minute after its last change, not at every change:
// each change puts its save off, starting the timer again under the same
// name (which replaces the one waiting, allocating nothing).
type notes struct {
	lines []string
	saved chan<- string
}

type (
	write     struct{ line string }
	saveNotes struct{}
	barrier   struct{}
)

func (g *notes) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case write:
		g.lines = append(g.lines, m.line)
		return nil, c.StartTimer("save", time.Minute, 0, saveNotes{}) // put off
	case saveNotes:
		g.saved <- strings.Join(g.lines, " ")
	}
	return nil, nil
}

// A timer put off at every message fires once, a minute after the last:
// a write-behind save, a debounce (Akka's startSingleTimer with one key).
func Example_putATimerOff() {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, _ := silo.New(silo.Config{Clock: clk, IdleTimeout: -1})
	saved := make(chan string, 10)
	_ = silo.Register(s, "notes", func(grain.ID) *notes { return &notes{saved: saved} })
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()
	id := grain.NewID("notes", "n1")

	for _, line := range []string{"buy", "milk", "today"} {
		_, _ = s.Ask(ctx, id, write{line})
		clk.Advance(40 * time.Second) // less than a minute: not saved yet
	}
	_, _ = s.Ask(ctx, id, barrier{}) // a barrier: a tick due by now has run
	fmt.Println("saves so far:", len(saved))
	clk.Advance(20 * time.Second) // a minute after the last write
	_, _ = s.Ask(ctx, id, barrier{})
	fmt.Println("saved:", <-saved)
	clk.Advance(time.Hour)
	_, _ = s.Ask(ctx, id, barrier{})
	fmt.Println("saves since:", len(saved))
	// Output:
	// saves so far: 0
	// saved: buy milk today
	// saves since: 0
}

// A wallet grain whose handler panics on a corrupt state.
type wallet struct{ balance int }

type (
	deposit struct{ amount int }
	corrupt struct{}
)

func (w *wallet) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case deposit:
		w.balance += m.amount
		return w.balance, nil
	case corrupt:
		panic("invariant broken")
	}
	return nil, nil
}

// A panic reaches its caller as a *grain.PanicError; the kind's
// supervision decides what happens to the grain. Here, the default:
// a panic restarts it, so the next message finds fresh state.
func ExampleWithSupervision() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "wallet", func(grain.ID) *wallet { return &wallet{} },
		silo.WithSupervision(activation.Supervision{MaxRestarts: 3, Window: time.Minute}))
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	id := grain.NewID("wallet", "w1")
	b, _ := silo.Call[int](ctx, s, id, deposit{10})
	fmt.Println("balance", b)
	_, err := s.Ask(ctx, id, corrupt{})
	var pe *grain.PanicError
	fmt.Println(errors.As(err, &pe), errors.Is(err, grain.ErrPanic), pe.Value)
	b, _ = silo.Call[int](ctx, s, id, deposit{5})
	fmt.Println("balance after restart", b)
	// Output:
	// balance 10
	// true true invariant broken
	// balance after restart 5
}

// feedGrain holds a subscription from OnActivate to OnDeactivate, as a
// grain holds a file, a connection or a goroutine of its own; it records
// what its hooks did, for the example to print.
type feedGrain struct {
	instance int
	log      *[]string
	mu       *sync.Mutex
}

func (f *feedGrain) note(format string, args ...any) {
	f.mu.Lock()
	*f.log = append(*f.log, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *feedGrain) OnActivate(context.Context, *grain.Context) error {
	f.note("instance %d subscribes", f.instance)
	return nil
}

func (f *feedGrain) OnDeactivate(_ context.Context, c *grain.Context) error {
	f.note("instance %d unsubscribes (%v)", f.instance, c.DeactivationReason())
	return nil
}

func (f *feedGrain) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "crash" {
		panic("feed: corrupt frame")
	}
	return f.instance, nil
}

// A restart runs the failed instance's OnDeactivate before the fresh
// instance's OnActivate, as Akka runs postStop before a restart: what the
// instance held is let go, not leaked at every panic. Its reason, failed,
// says the state is suspect: release, do not save.
func Example_restartReleasesWhatTheInstanceHeld() {
	var mu sync.Mutex
	var log []string
	built := 0
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "feed", func(grain.ID) *feedGrain {
		built++ // factories run on the grain's partition, one at a time for an ID
		return &feedGrain{instance: built, log: &log, mu: &mu}
	})
	_ = s.Start()
	ctx := context.Background()

	id := grain.NewID("feed", "prices")
	_, _ = s.Ask(ctx, id, "hello")
	_, err := s.Ask(ctx, id, "crash")
	fmt.Println(errors.Is(err, grain.ErrPanic))
	n, _ := silo.Call[int](ctx, s, id, "hello") // behind the hook and the fresh activation
	fmt.Println("answered by instance", n)
	_ = s.Shutdown(ctx)
	for _, l := range log {
		fmt.Println(l)
	}
	// Output:
	// true
	// answered by instance 2
	// instance 1 subscribes
	// instance 1 unsubscribes (failed)
	// instance 2 subscribes
	// instance 2 unsubscribes (shutdown)
}

// A Decider that does more than look at the error is a ContextDeciderFunc:
// given the failed turn's ctx, it has the caller's values, and its calls
// are the turn's — here it files an incident, with the request's ID, at a
// grain of its own, then stops the broken wallet.
func Example_contextDecider() {
	var s *silo.Silo
	incidents := make(chan string, 1)
	decider := activation.ContextDeciderFunc(func(ctx context.Context, id grain.ID, err error) activation.Directive {
		if activation.OwnPanic(id, err) { // its own panic, not a callee's it returned
			_, _ = s.Ask(ctx, grain.NewID("incidents", "wallets"), id.String())
			return activation.Stop
		}
		return activation.DefaultDecider(id, err)
	})
	s, _ = silo.New(silo.Config{})
	_ = silo.Register(s, "wallet", func(grain.ID) *wallet { return &wallet{} },
		silo.WithSupervision(activation.Supervision{Decider: decider}))
	_ = silo.Register(s, "incidents", func(grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			incidents <- fmt.Sprintf("%v in request %v", msg, ctx.Value(requestIDKey{}))
			return nil, nil
		}
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.WithValue(context.Background(), requestIDKey{}, "r-17")

	id := grain.NewID("wallet", "w1")
	_, err := s.Ask(ctx, id, corrupt{})
	fmt.Println(errors.Is(err, grain.ErrPanic))
	fmt.Println("incident:", <-incidents)
	_, err = s.Ask(ctx, id, deposit{5})
	fmt.Println(errors.Is(err, grain.ErrGrainStopped))
	// Output:
	// true
	// incident: wallet/w1 in request r-17
	// true
}

// A node grain that asks its parent, which may ask it back.
type node struct{ parent grain.ID }

type (
	depth    struct{}
	askChild struct{ allowReentry bool }
)

func (n *node) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case depth:
		if n.parent.IsZero() {
			return 0, nil
		}
		d, err := silo.Call[int](ctx, c.Silo(), n.parent, depth{})
		return d + 1, err
	case askChild:
		// The child asks this grain back while it waits: a cycle, unless
		// this call lets its chain re-enter.
		if m.allowReentry {
			ctx = silo.AllowCallChainReentrancy(ctx)
		}
		child := grain.NewID("node", c.ID().Key()+"/child")
		return silo.Call[int](ctx, c.Silo(), child, depth{})
	}
	return nil, nil
}

// A call that would wait on a grain already waiting in its call chain fails
// at once with a *grain.CallCycleError — no 30-second hang — unless the
// call that started the cycle allowed its chain to re-enter.
func ExampleAllowCallChainReentrancy() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "node", func(id grain.ID) *node {
		if parent, ok := strings.CutSuffix(id.Key(), "/child"); ok {
			return &node{parent: grain.NewID("node", parent)}
		}
		return &node{}
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	d, err := silo.Call[int](ctx, s, grain.NewID("node", "a/child"), depth{})
	fmt.Println("depth", d, err)
	// a asks a/child, which asks a back on the same chain: allowed.
	d, err = silo.Call[int](ctx, s, grain.NewID("node", "a"), askChild{allowReentry: true})
	fmt.Println("depth seen from a", d, err)
	// Without the allowance, a/child asking a (waiting for it) is a cycle.
	_, err = silo.Call[int](ctx, s, grain.NewID("node", "a"), askChild{})
	var cycle *grain.CallCycleError
	fmt.Println(errors.As(err, &cycle), cycle.Chain)
	// Output:
	// depth 1 <nil>
	// depth seen from a 1 <nil>
	// true [node/a node/a/child node/a]
}

// mirror forwards a call to its namesake on the other silo, hops times.
type mirror struct{ other **silo.Silo }

func (m *mirror) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	hops := msg.(int)
	if hops == 0 {
		return 0, nil
	}
	n, err := silo.Call[int](ctx, *m.other, c.ID(), hops-1)
	return n + 1, err
}

// Two silos in one process each host a grain of every ID: a chain that
// passes through both may name one ID again without a cycle, and when it
// does come back to a grain that waits, the error names each grain's silo.
func Example_callCycleAcrossSilos() {
	var eu, us *silo.Silo
	eu, _ = silo.New(silo.Config{Name: "eu"})
	us, _ = silo.New(silo.Config{Name: "us"})
	_ = silo.Register(eu, "mirror", func(grain.ID) *mirror { return &mirror{other: &us} })
	_ = silo.Register(us, "mirror", func(grain.ID) *mirror { return &mirror{other: &eu} })
	_ = eu.Start()
	_ = us.Start()
	defer eu.Close()
	defer us.Close()
	ctx := context.Background()
	id := grain.NewID("mirror", "m")

	// eu's m calls us's m: another grain, no cycle.
	n, err := silo.Call[int](ctx, eu, id, 1)
	fmt.Println(n, err)
	// eu's m calls us's m, which calls eu's m, still waiting: a cycle.
	_, err = silo.Call[int](ctx, eu, id, 2)
	var cycle *grain.CallCycleError
	fmt.Println(errors.As(err, &cycle), cycle.Silos)
	fmt.Println(err)
	// Output:
	// 1 <nil>
	// true [eu us eu]
	// granary: call cycle: mirror/m (silo eu) -> mirror/m (silo us) -> mirror/m (silo eu)
}

// A printer grain that can be held in a turn.
type printer struct{ jobs int }

type (
	holdUntil struct {
		started chan<- struct{}
		release <-chan struct{}
	}
	printDoc struct{ doc string }
)

func (p *printer) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case holdUntil:
		close(m.started)
		<-m.release
	case printDoc:
		p.jobs++
		return p.jobs, nil
	}
	return nil, nil
}

// Stop draws a line in a grain's messages: those sent before it become dead
// letters (an ask among them fails with ErrGrainStopped), the turn running
// finishes, and messages sent after it go to a fresh instance.
func ExampleSilo_Stop() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "printer", func(grain.ID) *printer { return &printer{} })
	_ = s.Start()
	defer s.Close()
	dl := s.SubscribeDeadLetters(16)
	ctx := context.Background()

	id := grain.NewID("printer", "p1")
	started, release := make(chan struct{}), make(chan struct{})
	_ = s.Tell(ctx, id, holdUntil{started, release})
	<-started // a turn runs: it will finish, whatever comes
	_ = s.Tell(ctx, id, printDoc{"a"})
	_ = s.Tell(ctx, id, printDoc{"b"})
	_ = s.Stop(ctx, id)
	close(release)
	for range 2 {
		d := <-dl.C
		fmt.Println("dead letter:", d.Msg, d.Reason)
	}
	n, _ := silo.Call[int](ctx, s, id, printDoc{"c"})
	fmt.Println("jobs of the fresh instance:", n)
	// Output:
	// dead letter: {a} stopped
	// dead letter: {b} stopped
	// jobs of the fresh instance: 1
}

// A backlog limit refuses what comes for a grain whose turn is blocked
// once its backlog is full (RejectNewest, the default policy): the caller
// hears ErrOverloaded at once, and the refused message is a dead letter.
// Once its turns run again it takes messages again; a grain whose turns
// run but that is sent more than it handles makes its senders wait for
// room instead.
func ExampleWithMaxBacklog() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "printer", func(grain.ID) *printer { return &printer{} },
		silo.WithMaxBacklog(2, silo.RejectNewest))
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	id := grain.NewID("printer", "office")
	started, release := make(chan struct{}), make(chan struct{})
	_ = s.Tell(ctx, id, holdUntil{started, release})
	<-started // the printer jams in a turn
	_ = s.Tell(ctx, id, printDoc{"a"})
	_ = s.Tell(ctx, id, printDoc{"b"})
	for backlog(s) < 2 { // both wait for it: its backlog is full
		runtime.Gosched()
	}
	err := s.Tell(ctx, id, printDoc{"c"})
	fmt.Println("refused:", errors.Is(err, silo.ErrOverloaded))
	close(release) // unjammed: it prints what waits, and takes messages again
	n, err := silo.Call[int](ctx, s, id, printDoc{"d"})
	for errors.Is(err, silo.ErrOverloaded) { // not yet: a caller may try again
		runtime.Gosched()
		n, err = silo.Call[int](ctx, s, id, printDoc{"d"})
	}
	fmt.Println("jobs printed:", n, err)
	// Output:
	// refused: true
	// jobs printed: 3 <nil>
}

// backlog is the number of messages waiting in grains' mailboxes.
func backlog(s *silo.Silo) (n int) {
	for _, b := range s.Stats().Backlog {
		n += b
	}
	return n
}

// A transfer grain that, inside its turn, asks its peer to confirm.
type account struct{ peer grain.ID }

type (
	transfer struct {
		ready chan<- struct{}
		begin <-chan struct{}
	}
	confirm struct{}
)

func (a *account) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case transfer:
		m.ready <- struct{}{}
		<-m.begin // both accounts are inside a transfer now
		return silo.Call[string](ctx, c.Silo(), a.peer, confirm{})
	case confirm:
		return "confirmed by " + c.ID().Key(), nil
	}
	return nil, nil
}

// Two transfers, each started by its own caller, each asking the other
// account to confirm while its own turn waits: a deadlock no single call
// chain shows. The call that closes it fails at once with ErrCallCycle;
// the other transfer completes. (Orleans leaves both to time out.)
func Example_deadlockAcrossCallChains() {
	s, _ := silo.New(silo.Config{})
	alice, bob := grain.NewID("account", "alice"), grain.NewID("account", "bob")
	_ = silo.Register(s, "account", func(id grain.ID) *account {
		if id == alice {
			return &account{peer: bob}
		}
		return &account{peer: alice}
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	ready, start := make(chan struct{}), make(chan struct{})
	errs := make(chan error)
	for _, id := range []grain.ID{alice, bob} {
		go func() {
			_, err := s.Ask(ctx, id, transfer{ready, start})
			errs <- err
		}()
	}
	<-ready
	<-ready
	close(start)
	var failed, done int
	for range 2 {
		if err := <-errs; errors.Is(err, grain.ErrCallCycle) {
			failed++
		} else if err == nil {
			done++
		}
	}
	fmt.Println("completed:", done, "failed as a deadlock:", failed)
	// Output: completed: 1 failed as a deadlock: 1
}

// A feed grain that fetches from a slow source while it keeps serving reads.
type feed struct{ fetched int }

type (
	refresh struct{ source grain.ID }
	read    struct{}
)

func (f *feed) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case refresh:
		n, err := silo.Call[int](ctx, c.Silo(), m.source, "fetch") // the turn waits here...
		f.fetched += n
		return f.fetched, err
	case read:
		return f.fetched, nil // ...and, the kind letting reads in, they run meanwhile
	}
	return nil, nil
}

// A reentrant kind interleaves its turns at the calls they wait in, as
// Orleans' [Reentrant] grains do: a read is answered while a refresh waits
// on a slow source. Between calls, a turn still runs alone.
func ExampleWithReentrant() {
	s, _ := silo.New(silo.Config{})
	fetching, release := make(chan struct{}), make(chan struct{})
	_ = silo.Register(s, "feed", func(grain.ID) *feed { return &feed{} }, silo.WithReentrant())
	_ = silo.Register(s, "source", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) {
			close(fetching)
			<-release // slow
			return 3, nil
		}
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	id := grain.NewID("feed", "news")
	refreshed := make(chan int)
	go func() {
		n, _ := silo.Call[int](ctx, s, id, refresh{grain.NewID("source", "wire")})
		refreshed <- n
	}()
	<-fetching // the refresh's turn waits on the source now
	n, _ := silo.Call[int](ctx, s, id, read{})
	fmt.Println("read while refreshing:", n)
	close(release)
	fmt.Println("refreshed:", <-refreshed)
	// Output:
	// read while refreshing: 0
	// refreshed: 3
}

// A kind may let some messages in while one of its turns waits in a call,
// as Orleans' [AlwaysInterleave] methods do: here a read is answered while
// a refresh waits on its source, and a second refresh, which the predicate
// does not take, waits for the first to end.
func ExampleWithMayInterleave() {
	s, _ := silo.New(silo.Config{})
	fetching, release := make(chan struct{}, 2), make(chan struct{})
	_ = silo.Register(s, "feed", func(grain.ID) *feed { return &feed{} }, silo.WithMayInterleave(func(msg any) bool {
		_, ok := msg.(read)
		return ok
	}))
	_ = silo.Register(s, "source", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) {
			fetching <- struct{}{}
			<-release // slow
			return 3, nil
		}
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	id := grain.NewID("feed", "news")
	refreshed := make(chan int, 2)
	for range 2 {
		go func() {
			n, _ := silo.Call[int](ctx, s, id, refresh{grain.NewID("source", "wire")})
			refreshed <- n
		}()
	}
	<-fetching // one refresh's turn waits on the source; the other waits for it
	n, _ := silo.Call[int](ctx, s, id, read{})
	fmt.Println("read while refreshing:", n)
	close(release)
	a, b := <-refreshed, <-refreshed
	fmt.Println("refreshed:", min(a, b), max(a, b))
	// Output:
	// read while refreshing: 0
	// refreshed: 3 6
}

// A stock price grain that polls an outside service in its turn.
type stockPrice struct{ last int }

type (
	poll struct {
		started chan<- struct{}
		reply   <-chan int // the service's answer: a network call, in life
	}
	quote struct{}
)

func (t *stockPrice) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case poll:
		var v int
		err := silo.Await(ctx, func() error { // touches no state of the grain
			close(m.started)
			v = <-m.reply
			return nil
		})
		t.last = v // after the wait: other turns may have run
		return v, err
	case quote:
		return t.last, nil
	}
	return nil, nil
}

// Await makes a wait that is no grain call an await point, as every await
// is in an Orleans reentrant grain: a quote is answered while a poll waits
// on the outside service.
func ExampleAwait() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "price", func(grain.ID) *stockPrice { return &stockPrice{last: 100} }, silo.WithReentrant())
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	id := grain.NewID("price", "ACME")
	started, reply := make(chan struct{}), make(chan int)
	polled := make(chan int)
	go func() {
		v, _ := silo.Call[int](ctx, s, id, poll{started, reply})
		polled <- v
	}()
	<-started
	v, _ := silo.Call[int](ctx, s, id, quote{})
	fmt.Println("quote while polling:", v)
	reply <- 101
	fmt.Println("polled:", <-polled)
	// Output:
	// quote while polling: 100
	// polled: 101
}

// A kind whose handler blocks on I/O says so at Register: each of its
// turns starts off its partition, and the partition's other grains are
// served at once while it waits — here on one partition, a status check
// answered while an account's turn waits for its bank.
func ExampleWithBlockingTurns() {
	bank := make(chan int) // an outside service, answering when it will
	s, _ := silo.New(silo.Config{Partitions: 1})
	_ = silo.Register(s, "account", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) {
			return <-bank, nil // a blocking call, as to a database
		}
	}, silo.WithBlockingTurns())
	_ = silo.Register(s, "status", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) { return "up", nil }
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	balance := make(chan int)
	go func() {
		v, _ := silo.Call[int](ctx, s, grain.NewID("account", "alice"), "balance")
		balance <- v
	}()
	v, _ := silo.Call[string](ctx, s, grain.NewID("status", "silo"), "ping")
	fmt.Println("status while the account waits:", v)
	bank <- 250
	fmt.Println("balance:", <-balance)
	// Output:
	// status while the account waits: up
	// balance: 250
}

// A checkout that is under way when the silo shuts down still completes:
// its call to the stock grain and its tell to the audit grain are part of
// the work the silo had taken, and go through; a send from outside is
// refused at once. (Here the checkout itself begins the shutdown, so the
// example needs no timing.)
func ExampleSilo_Shutdown() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "stock", func(grain.ID) grain.Func {
		left := 3
		return func(context.Context, *grain.Context, any) (any, error) {
			left--
			return left, nil
		}
	})
	audited := make(chan any, 1)
	_ = silo.Register(s, "audit", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
			audited <- msg
			return nil, nil
		}
	})
	_ = silo.Register(s, "checkout", func(grain.ID) grain.Func {
		return func(ctx context.Context, c *grain.Context, _ any) (any, error) {
			fmt.Println("shutdown begun:", errors.Is(s.Shutdown(ctx), silo.ErrShutdownFromTurn))
			fmt.Println("outside send:", s.Tell(context.Background(), grain.NewID("audit", "log"), "x"))
			left, err := silo.Call[int](ctx, c.Silo(), grain.NewID("stock", "sku-1"), "take one")
			fmt.Println("stock call:", left, err)
			fmt.Println("audit tell:", c.Silo().Tell(ctx, grain.NewID("audit", "log"), "sold"))
			return "paid", nil
		}
	})
	_ = s.Start()
	ctx := context.Background()

	v, err := s.Ask(ctx, grain.NewID("checkout", "cart-7"), "pay")
	<-s.Done()
	fmt.Println(v, err)
	fmt.Println("audited:", <-audited)
	// Output:
	// shutdown begun: true
	// outside send: granary: silo closed
	// stock call: 2 <nil>
	// audit tell: <nil>
	// paid <nil>
	// audited: sold
}

// A document grain: its content is its state; it says when it goes.
type document struct{ gone chan<- string }

func (d document) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }
func (d document) OnDeactivate(_ context.Context, gc *grain.Context) error {
	d.gone <- gc.ID().Key()
	return nil
}

// Config.MemoryLimit sheds activations when memory runs short, whatever
// their idle timeout: those nearest it first, as many as would bring memory
// back to nine tenths of the limit. The default gauge is the Go heap's live
// bytes; a test passes its own, as it passes a manual clock.
func ExampleConfig_memoryLimit() {
	var inUse atomic.Uint64 // what the gauge reads
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, _ := silo.New(silo.Config{
		Clock: clk, IdleTimeout: time.Hour, IdleQuantum: time.Second,
		MemoryLimit: 400 << 20, MemoryGauge: silo.MemoryGaugeFunc(inUse.Load),
		Partitions: 1, // each partition sheds its share: one, for a plain count
	})
	gone := make(chan string, 10)
	_ = silo.Register(s, "doc", func(grain.ID) document { return document{gone} })
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	for _, name := range []string{"draft", "memo", "notes", "report", "slides"} {
		_, _ = s.Ask(ctx, grain.NewID("doc", name), "open") // a minute apart
		clk.Advance(time.Minute)
	}
	inUse.Store(500 << 20) // 100 MB over: 28 % of the grains must go
	clk.Advance(time.Second)
	shed := []string{<-gone, <-gone}
	slices.Sort(shed)
	_, _ = s.Ask(ctx, grain.NewID("doc", "slides"), "open") // a barrier: the two are gone
	fmt.Println("shed:", shed, "left:", s.Stats().Activations["doc"])
	// Output:
	// shed: [draft memo] left: 3
}

// WithStatelessWorker lets one identity run on several activations at
// once — here a price calculator every checkout asks, which keeps no state
// of its own and would otherwise serve them one after another.
func ExampleWithStatelessWorker() {
	s, _ := silo.New(silo.Config{Partitions: 4})
	_ = silo.Register(s, "pricer", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
			qty := msg.(int)
			return qty * 250, nil // cents
		}
	}, silo.WithStatelessWorker(2)) // up to two activations of an identity
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	pricer := grain.NewID("pricer", "eu")
	var total atomic.Int64
	done := make(chan struct{})
	for qty := range 100 {
		go func() {
			cents, _ := silo.Call[int](ctx, s, pricer, qty)
			total.Add(int64(cents))
			done <- struct{}{}
		}()
	}
	for range 100 {
		<-done
	}
	ids, _ := s.ActiveGrains(ctx, "pricer")
	fmt.Println("total:", total.Load())
	fmt.Println("identities:", ids)
	fmt.Println("at most two activations:", s.Stats().Activations["pricer"] <= 2)
	// Output:
	// total: 1237500
	// identities: [pricer/eu]
	// at most two activations: true
}

// A stateless identity's spare activations — made while its first was
// busy — go once idle for WithSpareIdleTimeout (DefaultSpareIdleTimeout,
// 2 s, unless set), as Orleans 9.2 removes idle stateless workers; the
// first keeps the kind's idle timeout. Here a resizer's burst made a
// second activation, which goes 5 s after the burst, on a manual clock.
func ExampleWithSpareIdleTimeout() {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, _ := silo.New(silo.Config{Partitions: 2, Clock: clk, IdleTimeout: time.Hour})
	busy, release := make(chan struct{}), make(chan struct{})
	gone := make(chan grain.DeactivationReason, 2)
	_ = silo.Register(s, "resizer", func(grain.ID) *resizer { return &resizer{busy, release, gone} },
		silo.WithStatelessWorker(0), silo.WithSpareIdleTimeout(5*time.Second))
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	img := grain.NewID("resizer", "thumbnails")
	_ = s.Tell(ctx, img, "big") // the first activation takes it, and is busy with it
	<-busy
	_, _ = s.Ask(ctx, img, "small") // so a second activation answers this
	close(release)
	fmt.Println("after the burst:", s.Stats().Activations["resizer"])

	clk.Advance(6 * time.Second)
	fmt.Println("the spare went:", <-gone)
	ids, _ := s.ActiveGrains(ctx, "resizer") // a barrier on every partition: the spare has left
	fmt.Println("6 s later:", ids, s.Stats().Activations["resizer"])
	// Output:
	// after the burst: 2
	// the spare went: idle
	// 6 s later: [resizer/thumbnails] 1
}

// resizer is ExampleWithSpareIdleTimeout's stateless worker: a "big" job
// keeps its turn until released.
type resizer struct {
	busy, release chan struct{}
	gone          chan<- grain.DeactivationReason
}

func (r *resizer) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "big" {
		r.busy <- struct{}{}
		<-r.release
	}
	return "resized", nil
}

func (r *resizer) OnDeactivate(_ context.Context, c *grain.Context) error {
	r.gone <- c.DeactivationReason()
	return nil
}

type requestIDKey struct{}

// Config.Propagator carries what a program keeps in a ctx — here a request
// id — from a Tell to its handler, and on through the tells that handler
// makes with its own ctx. (An ask's handler has its caller's ctx already.)
func ExampleContextPropagator() {
	logged := make(chan string, 2)
	s, _ := silo.New(silo.Config{Propagator: silo.PropagatorFuncs{
		ExtractFunc: func(ctx context.Context) any { return ctx.Value(requestIDKey{}) }, // nil: nothing to carry
		InjectFunc: func(ctx context.Context, carried any) context.Context {
			return context.WithValue(ctx, requestIDKey{}, carried)
		},
	}})
	_ = silo.Register(s, "order", func(grain.ID) grain.Func {
		return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
			logged <- fmt.Sprintf("order %s, request %v", gc.ID().Key(), ctx.Value(requestIDKey{}))
			// A tell from the turn, with its ctx: the request id goes on.
			return nil, gc.Silo().Tell(ctx, grain.NewID("mailer", "m"), "confirm")
		}
	})
	_ = silo.Register(s, "mailer", func(grain.ID) grain.Func {
		return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
			logged <- fmt.Sprintf("mailer, request %v", ctx.Value(requestIDKey{}))
			return nil, nil
		}
	})
	_ = s.Start()
	defer s.Close()

	ctx := context.WithValue(context.Background(), requestIDKey{}, "req-42")
	_ = s.Tell(ctx, grain.NewID("order", "o-7"), "place")
	fmt.Println(<-logged)
	fmt.Println(<-logged)
	// Output:
	// order o-7, request req-42
	// mailer, request req-42
}

// A lobby grain that asks every player at once and waits for all replies.
type lobby struct{ players []grain.ID }

type score struct{}

func (r *lobby) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	s := gc.Silo() // gc belongs to the turn: goroutines take what they need first
	scores := make([]int, len(r.players))
	errs := make([]error, len(r.players))
	var wg sync.WaitGroup
	for i, p := range r.players {
		wg.Go(func() { scores[i], errs[i] = silo.Call[int](ctx, s, p, score{}) }) // the turn's ctx: its chain and deadline
	}
	wg.Wait() // every reply in: the turn goes on alone
	total := 0
	for _, n := range scores {
		total += n
	}
	return total, errors.Join(errs...)
}

// A turn may call several grains at once, from goroutines of its own, and
// wait for them all (Orleans' Task.WhenAll): the grain stays busy, the
// partition serves other grains meanwhile, and if a callee's turn, on a
// chain of its own, calls the grain back, the cycle fails at once with
// ErrCallCycle rather than wait for the deadline (docs/calls.md).
func Example_fanOut() {
	s, _ := silo.New(silo.Config{})
	players := []grain.ID{grain.NewID("player", "ann"), grain.NewID("player", "bo"), grain.NewID("player", "cy")}
	_ = silo.Register(s, "lobby", func(grain.ID) *lobby { return &lobby{players: players} })
	_ = silo.Register(s, "player", func(id grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) { return len(id.Key()), nil }
	})
	_ = s.Start()
	defer s.Close()

	total, err := silo.Call[int](context.Background(), s, grain.NewID("lobby", "main"), score{})
	fmt.Println(total, err)
	// Output: 7 <nil>
}

// An inspector that checks itself before it answers — with the wrong ctx.
type inspector struct{}

func (inspector) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "audit" {
		// The mistake: context.Background() carries no call chain, so the
		// silo cannot see that this call waits on the turn making it.
		return silo.Call[string](context.Background(), c.Silo(), c.ID(), "status")
	}
	return "ok", nil
}

// A call a turn makes with a ctx that is not the turn's cannot be seen to
// close a cycle: here it would wait for its timeout. With CheckContexts —
// on in every silo silotest.Start makes — it fails at once instead, naming
// the mistake; passing the turn's ctx on, the call back fails at once with
// ErrCallCycle, in production too.
func ExampleConfig_checkContexts() {
	s, _ := silo.New(silo.Config{CheckContexts: true})
	_ = silo.Register(s, "inspector", func(grain.ID) inspector { return inspector{} })
	_ = s.Start()
	defer s.Close()

	_, err := s.Ask(context.Background(), grain.NewID("inspector", "a"), "audit")
	fmt.Println(errors.Is(err, grain.ErrForeignContext))
	fmt.Println(err)
	// Output:
	// true
	// granary: a call from a grain's turn with a ctx that is not the turn's: a call of string to inspector/a; pass the turn's ctx on (context.WithoutCancel(ctx) for a call that outlives the turn)
}
