package silo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

// journal records lifecycle events of the life grains, in order.
type journal struct {
	mu     sync.Mutex
	events []string
	deact  chan string // receives the key of each deactivated grain
}

func newJournal() *journal { return &journal{deact: make(chan string, 1024)} }

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.events...)
}

// take returns the events so far and forgets them.
func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.events
	j.events = nil
	return e
}

// life is a grain whose lifecycle is journaled. instance tells activations
// apart; n is its state.
type life struct {
	j         *journal
	instance  int
	n         int
	deactErr  error
	deactPan  bool
	deactHang <-chan struct{} // OnDeactivate waits for it, ignoring ctx
}

type (
	keepAlive  struct{ d time.Duration }
	deactivate struct{}
	whoAmI     struct{}
	// tellLater: the turn signals started, waits for until, asks first
	// (if set), then tells msg to to
	tellLater struct {
		started chan<- struct{}
		until   <-chan struct{}
		first   grain.ID
		to      grain.ID
		msg     any
	}
)

func (l *life) OnActivate(_ context.Context, c *grain.Context) error {
	l.j.add("activate %s #%d", c.ID().Key(), l.instance)
	return nil
}

func (l *life) OnDeactivate(_ context.Context, c *grain.Context) error {
	l.j.add("deactivate %s #%d", c.ID().Key(), l.instance)
	l.j.deact <- c.ID().Key()
	if l.deactPan {
		panic("deactivate kaput")
	}
	if l.deactHang != nil {
		<-l.deactHang
	}
	return l.deactErr
}

func (l *life) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case incr:
		l.n += m.n
		l.j.add("incr %s #%d -> %d", c.ID().Key(), l.instance, l.n)
		return l.n, nil
	case get:
		return l.n, nil
	case whoAmI:
		return l.instance, nil
	case boom:
		l.j.add("boom %s #%d", c.ID().Key(), l.instance)
		panic(m.v)
	case fail:
		return nil, m.err
	case keepAlive:
		c.DelayDeactivation(m.d)
		return nil, nil
	case deactivate:
		c.DeactivateOnIdle()
		return nil, nil
	case block:
		select {
		case <-m.until:
		case <-ctx.Done():
		}
		return nil, nil
	case hold:
		<-m.until
		return nil, nil
	case tellLater:
		close(m.started)
		<-m.until
		if !m.first.IsZero() {
			if _, err := c.Silo().Ask(ctx, m.first, get{}); err != nil {
				return nil, err
			}
		}
		return nil, c.Silo().Tell(ctx, m.to, m.msg)
	}
	return nil, fmt.Errorf("life: %T", msg)
}

type lifeEnv struct {
	s     *silo.Silo
	clk   *clock.Manual
	j     *journal
	ctx   context.Context
	built map[string]int
	mu    sync.Mutex
	tweak func(*life) // applied to every new instance, if set
}

func newLife(t *testing.T, cfg silo.Config, opts ...silo.KindOption) *lifeEnv {
	e := &lifeEnv{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), j: newJournal(), ctx: ctxT(t), built: map[string]int{}}
	cfg.Clock = e.clk
	if cfg.Partitions == 0 {
		cfg.Partitions = 1
	}
	e.s = newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "life", func(id grain.ID) *life {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.built[id.Key()]++
			l := &life{j: e.j, instance: e.built[id.Key()]}
			if e.tweak != nil {
				e.tweak(l)
			}
			return l
		}, opts...))
	})
	return e
}

func (e *lifeEnv) id(key string) grain.ID { return grain.NewID("life", key) }

// hangFirstDeactivation makes the OnDeactivate of every grain's first
// instance wait until the channel it returns is closed; later instances
// deactivate at once.
func (e *lifeEnv) hangFirstDeactivation() chan struct{} {
	hang := make(chan struct{})
	e.tweak = func(l *life) {
		if l.instance == 1 {
			l.deactHang = hang
		}
	}
	return hang
}

func (e *lifeEnv) call(t *testing.T, key string, msg any) any {
	t.Helper()
	v, err := e.s.Ask(e.ctx, e.id(key), msg)
	require.NoError(t, err)
	return v
}

// A Decider is the program's code, run in the failed turn: one
// that panics is logged and the default directive applies (a panic
// restarts the grain, an error resumes it); the process goes on.
func TestPanickingDeciderFallsBackToTheDefault(t *testing.T) {
	var logs syncBuffer
	buggy := activation.Supervision{Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive {
		panic("decider bug")
	})}
	e := newLife(t, silo.Config{Logger: newTextLogger(&logs)}, silo.WithSupervision(buggy))
	e.call(t, "a", incr{5})
	_, err := e.s.Ask(e.ctx, e.id("a"), fail{errors.New("nope")})
	require.Error(t, err)
	assert.Equal(t, 5, e.call(t, "a", get{}), "an error resumes: same state")
	_, err = e.s.Ask(e.ctx, e.id("a"), boom{"x"})
	require.ErrorIs(t, err, grain.ErrPanic)
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}), "a panic restarts: a fresh instance")
	e.s.WaitLogged()
	assert.Contains(t, logs.String(), "Decider panicked")
}

// A Decider that returns no directive it knows (a Directive conversion of
// a number, say) is logged, and the default directive applies: before, it
// resumed the grain in silence, a panic's broken state and all.
func TestADecidersUndefinedDirectiveFallsBackToTheDefault(t *testing.T) {
	var logs syncBuffer
	odd := activation.Supervision{Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive {
		return activation.Directive(9)
	})}
	e := newLife(t, silo.Config{Logger: newTextLogger(&logs)}, silo.WithSupervision(odd))
	e.call(t, "a", incr{5})
	_, err := e.s.Ask(e.ctx, e.id("a"), boom{"x"})
	require.ErrorIs(t, err, grain.ErrPanic)
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}), "a panic restarts, as by default: a fresh instance")
	e.s.WaitLogged()
	assert.Contains(t, logs.String(), "Decider returned an undefined directive")
	assert.Contains(t, logs.String(), "directive=directive(9)")
}

// A Decider that ends its goroutine with runtime.Goexit (a require that
// fails in a test's decider) gets the default directive too: the turn's
// outcome is applied in full — before, the owner's goroutine ended halfway
// and the grain went on with its failed instance.
func TestDeciderCallingGoexitFallsBackToTheDefault(t *testing.T) {
	var logs syncBuffer
	exits := activation.Supervision{Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive {
		runtime.Goexit()
		return activation.Resume
	})}
	e := newLife(t, silo.Config{Logger: newTextLogger(&logs), Partitions: 1}, silo.WithSupervision(exits))
	e.call(t, "a", incr{5})
	_, err := e.s.Ask(e.ctx, e.id("a"), boom{"x"})
	require.ErrorIs(t, err, grain.ErrPanic)
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}), "a panic restarts: a fresh instance")
	assert.Equal(t, 0, e.call(t, "a", get{}))
	assert.Equal(t, 1, e.call(t, "b", whoAmI{}), "the partition goes on")
	e.s.WaitLogged()
	assert.Contains(t, logs.String(), "Decider called runtime.Goexit")
}

func TestResumeKeepsState(t *testing.T) {
	resume := activation.Supervision{Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive { return activation.Resume })}
	e := newLife(t, silo.Config{}, silo.WithSupervision(resume))
	e.call(t, "a", incr{5})
	_, err := e.s.Ask(e.ctx, e.id("a"), boom{"x"})
	require.ErrorIs(t, err, grain.ErrPanic, "the caller of the failing message gets the error")
	assert.Equal(t, 5, e.call(t, "a", get{}), "state kept")
	assert.Equal(t, 1, e.call(t, "a", whoAmI{}), "same instance")
}

func TestRestartBuildsFreshInstanceAndKeepsQueuedMessagesInOrder(t *testing.T) {
	e := newLife(t, silo.Config{})
	gate := make(chan struct{})
	e.call(t, "a", incr{5})
	// Queue, behind a blocked turn: a panic, then three increments.
	require.NoError(t, e.s.Tell(e.ctx, e.id("a"), block{gate}))
	failed := make(chan error, 1)
	go func() { _, err := e.s.Ask(e.ctx, e.id("a"), boom{"x"}); failed <- err }()
	waitBacklog(t, e.s, 1)
	for range 3 {
		require.NoError(t, e.s.Tell(e.ctx, e.id("a"), incr{1}))
	}
	waitBacklog(t, e.s, 4)
	close(gate)
	require.ErrorIs(t, <-failed, grain.ErrPanic)
	assert.Equal(t, 3, e.call(t, "a", get{}), "fresh state, queued messages applied in order")
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}))
	assert.Equal(t, []string{
		"activate a #1", "incr a #1 -> 5", "boom a #1", "deactivate a #1",
		"activate a #2", "incr a #2 -> 1", "incr a #2 -> 2", "incr a #2 -> 3",
	}, e.j.all(), "the failed instance's OnDeactivate, then OnActivate again, before the queued messages")
	assert.Equal(t, uint64(1), e.s.Stats().Restarts)
}

func TestRestartQueuedBehindBackoff(t *testing.T) {
	sup := activation.Supervision{MaxRestarts: 5, MinBackoff: time.Second, MaxBackoff: 4 * time.Second}
	e := newLife(t, silo.Config{}, silo.WithSupervision(sup))
	id := e.id("a")
	_, err := e.s.Ask(e.ctx, id, boom{1})
	require.ErrorIs(t, err, grain.ErrPanic)
	// The first restart is immediate.
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}))
	_, err = e.s.Ask(e.ctx, id, boom{2})
	require.ErrorIs(t, err, grain.ErrPanic)
	e.hookRan(t, "a", 2)
	// The second backs off MinBackoff: messages wait, they are not dropped.
	got := make(chan any, 1)
	go func() { v, _ := e.s.Ask(e.ctx, id, whoAmI{}); got <- v }()
	require.Eventually(t, func() bool { return e.clk.Pending() >= 2 }, 5*time.Second, time.Millisecond,
		"the backoff timer is scheduled")
	select {
	case v := <-got:
		t.Fatalf("answered during backoff: %v", v)
	default:
	}
	e.clk.Advance(time.Second)
	assert.Equal(t, 3, <-got)
}

// hourBackoff restarts a grain at once the first time, then backs off an
// hour: on a manual clock that never moves, for as long as the test runs.
var hourBackoff = activation.Supervision{MaxRestarts: 5, MinBackoff: time.Hour, MaxBackoff: time.Hour}

// backOffAnHour fails id twice under hourBackoff: restarted at once, then
// waiting out its hour.
func (e *lifeEnv) backOffAnHour(t *testing.T, id grain.ID) {
	t.Helper()
	for i := range 2 {
		_, err := e.s.Ask(e.ctx, id, boom{1})
		require.ErrorIs(t, err, grain.ErrPanic)
		e.hookRan(t, id.Key(), i+1)
	}
}

// hookRan waits until the OnDeactivate of instance n of the grain key has
// run — before a restart, the failed instance's — and its turn has ended:
// the owner's answer to ActiveGrains comes after it. A restart's backoff
// begins then, its clock timer in the place of the hook's give-up timer.
func (e *lifeEnv) hookRan(t *testing.T, key string, n int) {
	t.Helper()
	want := fmt.Sprintf("deactivate %s #%d", key, n)
	require.Eventually(t, func() bool { return slices.Contains(e.j.all(), want) }, 5*time.Second, time.Millisecond, want)
	_, err := e.s.ActiveGrains(e.ctx, "life")
	require.NoError(t, err)
}

// A Stop of a grain waiting out a restart's backoff ends the backoff: the
// failed instance is gone already, so nothing deactivates, and the next
// message activates a fresh instance at once — here on a manual clock that
// never moves, which would otherwise hold it for the hour's backoff.
func TestAStopEndsARestartBackoff(t *testing.T) {
	e := newLife(t, silo.Config{}, silo.WithSupervision(hourBackoff))
	id := e.id("a")
	e.backOffAnHour(t, id)
	require.Eventually(t, func() bool { return e.clk.Pending() >= 2 }, 5*time.Second, time.Millisecond,
		"the backoff timer is scheduled")
	require.NoError(t, e.s.Stop(e.ctx, id))
	assert.Equal(t, 3, e.call(t, "a", whoAmI{}), "a fresh instance, at once")
	assert.Empty(t, e.s.Stats().Deactivations, "the failed instance was gone already")
}

// Nor does the backoff's clock timer outlive the grain, or the silo: a
// timer left set kept the silo from the garbage collector until it fired
// (MaxBackoff, as long as a program sets it), then queued a restart for
// a grain or an owner that had gone. In a synctest bubble, on a clock that
// counts the timers set (jumpClock), each step ends with every goroutine
// idle: the timers counted are those left set.
func TestARestartBackoffsTimerGoesWithItsGrainAndSilo(t *testing.T) {
	for _, how := range []string{"stop", "close"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := new(jumpClock)
				s := newSilo(t, silo.Config{Clock: clk, IdleTimeout: -1, Logger: newTextLogger(io.Discard)}, func(s *silo.Silo) {
					require.NoError(t, silo.Register(s, "boomer", func(grain.ID) *boomer { return &boomer{} }, silo.WithSupervision(hourBackoff)))
				})
				ctx, id := context.Background(), grain.NewID("boomer", "b")
				for range 2 { // restarted at once, then backing off an hour
					require.NoError(t, s.Tell(ctx, id, "boom"))
					synctest.Wait()
				}
				backingOff := clk.armed.Load()
				require.Positive(t, backingOff)
				if how == "stop" {
					require.NoError(t, s.Stop(ctx, id))
					synctest.Wait()
					assert.Equal(t, backingOff-1, clk.armed.Load(), "the backoff's timer left set")
					return
				}
				require.NoError(t, s.Close())
				synctest.Wait()
				assert.Zero(t, clk.armed.Load(), "a clock timer left set")
			})
		})
	}
}

// boomer panics on "boom".
type boomer struct{}

func (*boomer) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "boom" {
		panic("boom")
	}
	return nil, nil
}

// Nor does the give-up timer of an OnDeactivate under way outlive a Close
// (which waits for a hook that ignores its ctx only DeactivationTimeout):
// the grain is gone, and the timer kept the silo until it fired.
func TestCloseDuringOnDeactivateLeavesNoTimerSet(t *testing.T) {
	e := newLife(t, silo.Config{IdleTimeout: -1, DeactivationTimeout: 10 * time.Millisecond})
	hang := e.hangFirstDeactivation()
	defer close(hang)
	e.call(t, "a", incr{1})
	require.NoError(t, e.s.Deactivate(e.ctx, e.id("a")))
	require.Equal(t, "a", <-e.j.deact) // OnDeactivate runs, and waits
	require.NoError(t, e.s.Close())
	assert.Zero(t, e.clk.Pending(), "a clock timer left set")
}

// A Shutdown does not wait out a restart's backoff: the grain restarts at
// once and its queued messages run — here on a manual clock that never
// moves, which would otherwise hold the Shutdown until its deadline.
func TestShutdownDoesNotWaitOutARestartBackoff(t *testing.T) {
	e := newLife(t, silo.Config{}, silo.WithSupervision(hourBackoff))
	id := e.id("a")
	e.backOffAnHour(t, id)
	got := make(chan any, 1)
	go func() { v, _ := e.s.Ask(e.ctx, id, whoAmI{}); got <- v }()
	waitBacklog(t, e.s, 1)

	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, e.s.Shutdown(ctx))
	assert.Equal(t, 3, <-got, "the queued ask ran on the restarted grain")
}

// Nor for a message a turn sends, while the silo settles, to a grain in its
// backoff: the grain restarts for it.
func TestShutdownRestartsAGrainInBackoffForATurnsMessage(t *testing.T) {
	e := newLife(t, silo.Config{Partitions: 2}, silo.WithSupervision(hourBackoff))
	// x backs off on one partition, next to z; y's turn, on the other,
	// asks z — so x's partition has begun settling — then tells x.
	pt, err := queues.NewPartitioner(2)
	require.NoError(t, err)
	x := e.id("x")
	var y, z grain.ID
	for i := 0; y.IsZero() || z.IsZero(); i++ {
		id := e.id(fmt.Sprint("k", i))
		if pt.Partition(id) == pt.Partition(x) {
			z = id
		} else {
			y = id
		}
	}
	e.backOffAnHour(t, x)
	started, gate := make(chan struct{}), make(chan struct{})
	require.NoError(t, e.s.Tell(e.ctx, y, tellLater{started: started, until: gate, first: z, to: x, msg: incr{5}}))
	<-started
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.s.Shutdown(ctx) }()
	require.Eventually(t, func() bool { return errors.Is(e.s.Tell(e.ctx, z, get{}), grain.ErrSiloClosed) }, 5*time.Second, time.Millisecond,
		"the Shutdown has begun")
	close(gate)
	require.NoError(t, <-done)
	assert.Contains(t, e.j.all(), "incr x #3 -> 5", "the restarted grain handled the turn's message")
}

func TestRestartLimitStopsAndQuarantines(t *testing.T) {
	sup := activation.Supervision{MaxRestarts: 2, Window: time.Minute, MinBackoff: time.Millisecond, Quarantine: 10 * time.Second}
	e := newLife(t, silo.Config{}, silo.WithSupervision(sup))
	dl := e.s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	id := e.id("a")
	_, err := e.s.Ask(e.ctx, id, boom{1}) // restart 1, immediate
	require.ErrorIs(t, err, grain.ErrPanic)
	e.call(t, "a", whoAmI{})
	_, err = e.s.Ask(e.ctx, id, boom{2}) // restart 2, after 1 ms
	require.ErrorIs(t, err, grain.ErrPanic)
	e.hookRan(t, "a", 2)
	require.Eventually(t, func() bool { return e.clk.Pending() >= 2 }, 5*time.Second, time.Millisecond)
	e.clk.Advance(time.Millisecond)
	assert.Equal(t, 3, e.call(t, "a", whoAmI{}))
	_, err = e.s.Ask(e.ctx, id, boom{3}) // past the limit: stop
	require.ErrorIs(t, err, grain.ErrPanic)
	for range 3 { // the two restarts' hooks, then the stop's: stopped grains deactivate
		<-e.j.deact
	}

	_, err = e.s.Ask(e.ctx, id, get{})
	require.ErrorIs(t, err, grain.ErrGrainStopped, "quarantined: asks fail fast")
	require.ErrorIs(t, err, grain.ErrDeadLetter)
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	for range 2 {
		d := <-dl.C
		assert.Equal(t, grain.ReasonQuarantined, d.Reason)
		assert.Equal(t, id, d.Target)
	}
	e.clk.Advance(10 * time.Second)
	assert.Equal(t, 4, e.call(t, "a", whoAmI{}), "after quarantine, a fresh activation")
	assert.Equal(t, uint64(1), e.s.Stats().Stops)
}

func TestStopDirectiveDeadLettersQueuedAndFailsAsks(t *testing.T) {
	errFatal := errors.New("fatal")
	stop := activation.Supervision{Decider: activation.DeciderFunc(func(_ grain.ID, err error) activation.Directive {
		if errors.Is(err, errFatal) {
			return activation.Stop
		}
		return activation.Resume
	})}
	e := newLife(t, silo.Config{}, silo.WithSupervision(stop))
	dl := e.s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	fatal := make(chan error, 1)
	go func() { _, err := e.s.Ask(e.ctx, id, fail{errFatal}); fatal <- err }()
	waitBacklog(t, e.s, 1)
	// Queued behind the fatal message: a tell and an ask.
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	waitBacklog(t, e.s, 2)
	pending := make(chan error, 1)
	go func() { _, err := e.s.Ask(e.ctx, id, get{}); pending <- err }()
	waitBacklog(t, e.s, 3)
	close(gate)
	require.ErrorIs(t, <-fatal, errFatal, "the failing caller gets its error")
	err := <-pending
	require.ErrorIs(t, err, grain.ErrGrainStopped)
	var dle *grain.DeadLetterError
	require.ErrorAs(t, err, &dle)
	assert.Equal(t, grain.ReasonStopped, dle.Reason)
	reasons := map[grain.Reason]int{}
	for range 2 {
		reasons[(<-dl.C).Reason]++
	}
	assert.Equal(t, map[grain.Reason]int{grain.ReasonStopped: 2}, reasons)
	assert.Equal(t, "a", <-e.j.deact, "the stopped grain is deactivated")
}

func TestIdleDeactivation(t *testing.T) {
	e := newLife(t, silo.Config{IdleTimeout: time.Minute, IdleQuantum: time.Second})
	e.call(t, "a", incr{1})
	e.clk.Advance(59 * time.Second)
	assert.Equal(t, 1, e.call(t, "a", whoAmI{}), "not idle long enough; and this message resets the clock")
	e.clk.Advance(59 * time.Second)
	assert.Equal(t, 1, e.call(t, "a", whoAmI{}))
	e.clk.Advance(61 * time.Second)
	assert.Equal(t, "a", <-e.j.deact)
	assert.Equal(t, 0, e.call(t, "a", get{}), "a fresh instance after idle deactivation")
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}))
}

func TestPerKindIdleTimeoutAndKeepAlive(t *testing.T) {
	e := newLife(t, silo.Config{IdleTimeout: time.Minute}, silo.WithIdleTimeout(10*time.Second))
	e.call(t, "short", incr{1})
	e.call(t, "kept", keepAlive{time.Hour})
	e.clk.Advance(11 * time.Second)
	assert.Equal(t, "short", <-e.j.deact, "the kind's own timeout")
	e.clk.Advance(30 * time.Minute)
	assert.Equal(t, 1, e.call(t, "kept", whoAmI{}), "DelayDeactivation holds it")
	e.clk.Advance(time.Hour)
	assert.Equal(t, "kept", <-e.j.deact)

	never := newLife(t, silo.Config{IdleTimeout: -1, IdleQuantum: time.Hour})
	never.call(t, "a", incr{1})
	never.clk.Advance(1000 * time.Hour)
	assert.Equal(t, 1, never.call(t, "a", whoAmI{}))
}

func TestDeactivateOnIdleAndMessagesRacingDeactivation(t *testing.T) {
	e := newLife(t, silo.Config{})
	e.call(t, "a", incr{1})
	// The deactivation request and the messages after it are queued together:
	// the messages wait for OnDeactivate, then go to a fresh activation.
	require.NoError(t, e.s.Tell(e.ctx, e.id("a"), deactivate{}))
	for range 3 {
		require.NoError(t, e.s.Tell(e.ctx, e.id("a"), incr{1}))
	}
	assert.Equal(t, 3, e.call(t, "a", get{}))
	assert.Equal(t, []string{
		"activate a #1", "incr a #1 -> 1", "deactivate a #1",
		"activate a #2", "incr a #2 -> 1", "incr a #2 -> 2", "incr a #2 -> 3",
	}, e.j.all())
	assert.Empty(t, e.s.Stats().DeadLetters)
}

func TestDeactivateHookPanicIsLoggedAndDeactivationCompletes(t *testing.T) {
	var logs syncBuffer
	e := newLife(t, silo.Config{Logger: newTextLogger(&logs)})
	e.mu.Lock()
	e.tweak = func(l *life) { l.deactPan = l.instance == 1 }
	e.mu.Unlock()
	e.call(t, "p", incr{1})
	e.call(t, "p", deactivate{})
	assert.Equal(t, "p", <-e.j.deact)
	assert.Equal(t, 2, e.call(t, "p", whoAmI{}), "deactivation completed; the next message activates afresh")
	e.s.WaitLogged()
	assert.Contains(t, logs.String(), "OnDeactivate failed")
	assert.Contains(t, logs.String(), "deactivate kaput")
	assert.Empty(t, e.s.Stats().DeadLetters)
}

func TestActivationLimitEvictsLeastRecentlyUsed(t *testing.T) {
	e := newLife(t, silo.Config{MaxActivations: 3, Partitions: 1})
	for _, k := range []string{"a", "b", "c"} {
		e.call(t, k, incr{1})
	}
	e.call(t, "a", get{}) // b is now the least recently used
	e.call(t, "d", incr{1})
	assert.Equal(t, "b", <-e.j.deact)
	e.call(t, "e", incr{1})
	assert.Equal(t, "c", <-e.j.deact)
	e.call(t, "d", get{}) // a barrier: c's deactivation has completed
	assert.Equal(t, 3, e.s.Stats().Activations["life"])
	assert.Equal(t, 1, e.call(t, "a", whoAmI{}), "a was kept")
}

// blockGrain activates the grain key and leaves a turn of it blocked until
// the returned gate is closed (or the silo closes).
func (e *lifeEnv) blockGrain(t *testing.T, key string, n int) chan struct{} {
	t.Helper()
	gate := make(chan struct{})
	e.call(t, key, incr{n})
	require.NoError(t, e.s.Tell(e.ctx, e.id(key), block{gate}))
	return gate
}

func TestOverloadRejectNewest(t *testing.T) {
	e := newLife(t, silo.Config{}, silo.WithMaxBacklog(2, silo.RejectNewest))
	dl := e.s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1})) // backlog now full
	waitBacklog(t, e.s, 2)
	err := e.s.Tell(e.ctx, id, incr{100})
	require.ErrorIs(t, err, grain.ErrOverloaded, "the sender gets ErrOverloaded")
	assert.EqualError(t, err, "granary: grain overloaded: "+id.String(), "naming the grain")
	_, err = e.s.Ask(e.ctx, id, get{})
	require.ErrorIs(t, err, grain.ErrOverloaded)
	close(gate)
	waitBacklog(t, e.s, 0)
	assert.Equal(t, 3, e.call(t, "a", get{}), "the rejected messages were not applied")
	for range 2 {
		assert.Equal(t, grain.ReasonOverload, (<-dl.C).Reason)
	}
	assert.Equal(t, uint64(2), e.s.Stats().DeadLetters[grain.ReasonOverload])
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1}), "accepting again once drained")
}

func TestOverloadDropOldest(t *testing.T) {
	e := newLife(t, silo.Config{}, silo.WithMaxBacklog(2, silo.DropOldest))
	dl := e.s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	for _, n := range []int{10, 100, 1000} {
		require.NoError(t, e.s.Tell(e.ctx, id, incr{n}))
	}
	d := <-dl.C
	assert.Equal(t, grain.ReasonOverload, d.Reason)
	assert.Equal(t, incr{10}, d.Msg, "the oldest waiting message was dropped")
	close(gate)
	waitBacklog(t, e.s, 0)
	assert.Equal(t, 1101, e.call(t, "a", get{}))
}

func TestShutdownHandlesQueuedAndDeactivatesAll(t *testing.T) {
	e := newLife(t, silo.Config{Partitions: 2})
	for i := range 20 {
		require.NoError(t, e.s.Tell(e.ctx, e.id(fmt.Sprint(i)), incr{1}))
	}
	require.NoError(t, e.s.Shutdown(e.ctx))
	incrs, deacts := 0, 0
	for _, ev := range e.j.all() {
		switch ev[:4] {
		case "incr":
			incrs++
		case "deac":
			deacts++
		}
	}
	assert.Equal(t, 20, incrs, "queued messages handled")
	assert.Equal(t, 20, deacts, "every grain deactivated")
	assert.Empty(t, e.s.Stats().DeadLetters)
	assert.Equal(t, 0, e.s.Stats().Activations["life"])
}

func TestShutdownPastDeadlineDeadLettersTheRest(t *testing.T) {
	e := newLife(t, silo.Config{})
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	pending := make(chan error, 1)
	go func() { _, err := e.s.Ask(e.ctx, id, get{}); pending <- err }()
	waitBacklog(t, e.s, 1)
	sctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	defer cancel()
	defer close(gate)
	// The blocked turn ends only when Close cancels its ctx.
	require.ErrorIs(t, e.s.Shutdown(sctx), context.DeadlineExceeded)
	err := <-pending
	require.ErrorIs(t, err, grain.ErrSiloClosed)
	assert.Equal(t, uint64(1), e.s.Stats().DeadLetters[grain.ReasonShutdown])
}

func TestCloseDeadLettersEverythingQueued(t *testing.T) {
	e := newLife(t, silo.Config{})
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	asks := make(chan error, 5)
	for range 5 {
		go func() { _, err := e.s.Ask(e.ctx, id, get{}); asks <- err }()
	}
	for range 5 {
		require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	}
	waitBacklog(t, e.s, 10)
	defer close(gate)
	require.NoError(t, e.s.Close()) // the blocked turn ends when Close cancels its ctx
	for range 5 {
		require.ErrorIs(t, <-asks, grain.ErrSiloClosed)
	}
	assert.Equal(t, uint64(10), e.s.Stats().DeadLetters[grain.ReasonShutdown])
	assert.NotContains(t, e.j.all(), "deactivate a #1", "Close skips OnDeactivate")
}

func TestSlowDeadLetterSubscriberDoesNotStallTheSilo(t *testing.T) {
	e := newLife(t, silo.Config{}, silo.WithMaxBacklog(1, silo.DropOldest))
	dl := e.s.SubscribeDeadLetters(1)
	defer dl.Cancel()
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	for range 50 {
		require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	}
	require.Eventually(t, func() bool { return e.s.Stats().DeadLetters[grain.ReasonOverload] == 49 },
		10*time.Second, 100*time.Microsecond)
	close(gate)
	waitBacklog(t, e.s, 0)
	assert.Equal(t, 2, e.call(t, "a", get{}))
	assert.Equal(t, uint64(49), e.s.Stats().DeadLetters[grain.ReasonOverload])
	assert.Equal(t, uint64(48), dl.Dropped(), "one fits the buffer; the rest are counted, not waited for")
}

// A handler that ignores its ctx cannot hold Shutdown past its deadline, nor
// leave a caller waiting: the ask it handles fails with ErrSiloClosed.
func TestShutdownDoesNotWaitForHandlersThatIgnoreCtx(t *testing.T) {
	e := newLife(t, silo.Config{DeactivationTimeout: 50 * time.Millisecond})
	id := e.id("stuck")
	gate := make(chan struct{})
	defer close(gate) // lets the handler go at the end, for goleak
	e.call(t, "stuck", incr{1})
	asked := make(chan error, 1)
	go func() { _, err := e.s.Ask(e.ctx, id, hold{gate}); asked <- err }()
	require.Eventually(t, func() bool { return e.s.Stats().Handoffs > 0 }, 5*time.Second, time.Millisecond,
		"the stuck turn was handed off")
	sctx, cancel := context.WithTimeout(e.ctx, 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.ErrorIs(t, e.s.Shutdown(sctx), context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, <-asked, grain.ErrSiloClosed)
	require.NoError(t, e.s.Close())
}

func TestDeactivateRequestGoesAheadOfQueuedMessages(t *testing.T) {
	e := newLife(t, silo.Config{})
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	for range 3 {
		require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	}
	waitBacklog(t, e.s, 3)
	require.NoError(t, e.s.Deactivate(e.ctx, id))
	// Deactivate is on the control lane: once the running turn ends, the
	// grain deactivates before its three queued messages, which then go to
	// a fresh activation.
	require.Eventually(t, func() bool { return e.s.Stats().QueueDepth[0] == 0 }, 5*time.Second, time.Millisecond)
	close(gate)
	assert.Equal(t, 3, e.call(t, "a", get{}))
	assert.Equal(t, []string{
		"activate a #1", "incr a #1 -> 1", "deactivate a #1",
		"activate a #2", "incr a #2 -> 1", "incr a #2 -> 2", "incr a #2 -> 3",
	}, e.j.all())
	require.NoError(t, e.s.Deactivate(e.ctx, e.id("never-active")), "nothing to do")
	require.ErrorIs(t, e.s.Deactivate(e.ctx, grain.NewID("nope", "x")), grain.ErrUnknownKind)
}

func TestStopRequestDeadLettersQueuedMessages(t *testing.T) {
	e := newLife(t, silo.Config{})
	dl := e.s.SubscribeDeadLetters(16)
	defer dl.Cancel()
	id := e.id("a")
	gate := e.blockGrain(t, "a", 5)
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	asked := make(chan error, 1)
	go func() { _, err := e.s.Ask(e.ctx, id, get{}); asked <- err }()
	waitBacklog(t, e.s, 2)
	require.NoError(t, e.s.Stop(e.ctx, id))
	require.ErrorIs(t, <-asked, grain.ErrGrainStopped)
	for range 2 {
		assert.Equal(t, grain.ReasonStopped, (<-dl.C).Reason)
	}
	close(gate)
	<-e.j.deact
	assert.Equal(t, 0, e.call(t, "a", get{}), "the next message activates a fresh instance")
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}))
}

// Stop draws a line in the grain's message stream: what was sent before it
// is a dead letter, what is sent after it waits for the stopped instance to
// be gone and goes to a fresh one — wherever each message was (mailbox or
// partition queue) when the owner read the Stop.
func TestMessagesSentAfterStopGoToAFreshInstance(t *testing.T) {
	e := newLife(t, silo.Config{})
	id := e.id("a")
	gate := e.blockGrain(t, "a", 5)
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1})) // before the Stop
	waitBacklog(t, e.s, 1)                           // behind the blocked turn, which has begun
	require.NoError(t, e.s.Stop(e.ctx, id))
	require.NoError(t, e.s.Tell(e.ctx, id, incr{2})) // after it
	got := make(chan any, 1)
	go func() { got <- e.call(t, "a", get{}) }()
	close(gate)
	assert.Equal(t, 2, <-got, "the fresh instance had only what was sent after the Stop")
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}))
	assert.Equal(t, uint64(1), e.s.Stats().DeadLetters[grain.ReasonStopped])
}

// The line holds however the owner's reads fall: tells sent just before a
// Stop are handled by the old instance or are dead letters, never seen by
// the next; a call right after it always reaches a fresh instance.
func TestCallRightAfterStopIsAlwaysAnswered(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	ctx := ctxT(t)
	id := grain.NewID("counter", "a")
	const rounds, tells = 200, 3
	for i := range rounds {
		for range tells {
			require.NoError(t, s.Tell(ctx, id, incr{1}))
		}
		require.NoError(t, s.Stop(ctx, id))
		n, err := silo.Call[int](ctx, s, id, get{})
		require.NoError(t, err, "round %d", i)
		require.Zero(t, n, "round %d: a fresh instance, which got nothing sent before the Stop", i)
		require.NoError(t, s.Stop(ctx, id))
	}
	assert.LessOrEqual(t, s.Stats().DeadLetters[grain.ReasonStopped], uint64(rounds*tells))
}

// With the real clock and no IdleQuantum set, the idle wheel's tick follows
// the shortest idle timeout, so a short timeout is honoured closely: in a
// synctest bubble, whose clock the silo reads as the real one, exactly.
func TestIdleQuantumFollowsShortTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := newJournal()
		s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
			require.NoError(t, silo.Register(s, "life", func(grain.ID) *life { return &life{j: j, instance: 1} },
				silo.WithIdleTimeout(40*time.Millisecond)))
		})
		ctx := ctxT(t)
		start := time.Now()
		_, err := s.Ask(ctx, grain.NewID("life", "short"), incr{1})
		require.NoError(t, err)
		select {
		case <-j.deact:
		case <-ctx.Done():
			t.Fatal("not deactivated")
		}
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 40*time.Millisecond, "not before its timeout")
		// The tick is an eighth of the timeout, 5 ms: the grain goes within
		// two of them; with the default 1 s tick it would take a second.
		assert.LessOrEqual(t, took, 50*time.Millisecond)
	})
}

// An OnDeactivate that ignores its ctx past DeactivationTimeout is given up
// on: the grain is removed and its waiting messages go to a fresh activation.
func TestOverrunningOnDeactivateIsGivenUpOn(t *testing.T) {
	var logs syncBuffer
	e := newLife(t, silo.Config{DeactivationTimeout: time.Second, Logger: newTextLogger(&logs)})
	hang := make(chan struct{})
	defer close(hang) // lets the hook go at the end, for goleak
	e.mu.Lock()
	e.tweak = func(l *life) {
		if l.instance == 1 {
			l.deactHang = hang
		}
	}
	e.mu.Unlock()
	e.call(t, "a", incr{1})
	require.NoError(t, e.s.Tell(e.ctx, e.id("a"), deactivate{}))
	<-e.j.deact // OnDeactivate runs, and hangs
	waited := make(chan any, 1)
	go func() { v, _ := e.s.Ask(e.ctx, e.id("a"), whoAmI{}); waited <- v }()
	waitBacklog(t, e.s, 1) // the ask waits for the deactivation
	require.Eventually(t, func() bool { return e.s.Stats().Handoffs > 0 }, 5*time.Second, time.Millisecond)
	e.clk.Advance(2 * time.Second)
	assert.Equal(t, 2, <-waited, "a fresh activation answered")
	e.s.WaitLogged()
	assert.Contains(t, logs.String(), "OnDeactivate overran")
}

// hookWaiter's OnDeactivate waits for its ctx to end, and reports why.
type hookWaiter struct {
	in  chan<- struct{}
	out chan<- error
}

func (h hookWaiter) Receive(context.Context, *grain.Context, any) (any, error) { return "ok", nil }

func (h hookWaiter) OnDeactivate(ctx context.Context, _ *grain.Context) error {
	h.in <- struct{}{}
	<-ctx.Done()
	h.out <- context.Cause(ctx)
	return ctx.Err()
}

// The silo gives up on an overrunning OnDeactivate on its own clock, and
// ends the hook's ctx then too: on a test's manual clock, a hook that
// waits on its ctx returns when the clock passes the timeout, not after
// that long in real time (an hour here: the test's deadline would come
// first). Its ctx used to end on real time only.
func TestGivingUpOnOnDeactivateEndsItsCtx(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, out := make(chan struct{}, 1), make(chan error, 1)
	ctx := ctxT(t)
	s := newSilo(t, silo.Config{Clock: clk, DeactivationTimeout: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hook", func(grain.ID) hookWaiter { return hookWaiter{in: in, out: out} }))
	})
	id := grain.NewID("hook", "h")
	_, err := s.Ask(ctx, id, "hi")
	require.NoError(t, err)
	require.NoError(t, s.Deactivate(ctx, id))
	<-in // OnDeactivate waits on its ctx
	clk.Advance(time.Hour + silo.DefaultHandoffThreshold)
	select {
	case cause := <-out:
		require.ErrorIs(t, cause, context.DeadlineExceeded)
		assert.Contains(t, cause.Error(), "DeactivationTimeout")
	case <-ctx.Done():
		t.Fatal("the hook's ctx did not end when the silo gave up on it")
	}
	v, err := s.Ask(ctx, id, "again") // a fresh activation
	require.NoError(t, err)
	assert.Equal(t, "ok", v)
}

// On the real clock an overrunning OnDeactivate's ctx ends at its own
// deadline, DeactivationTimeout after the hook began, with the cause a
// manual clock's give-up gives it: one ctx and one timer a hook, since a
// shutdown may run a million of them.
func TestOnDeactivatesCtxEndsAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in, out := make(chan struct{}, 1), make(chan error, 1)
		s, err := silo.New(silo.Config{DeactivationTimeout: time.Minute})
		require.NoError(t, err)
		require.NoError(t, silo.Register(s, "hook", func(grain.ID) hookWaiter { return hookWaiter{in: in, out: out} }))
		require.NoError(t, s.Start())
		defer s.Close()
		ctx := t.Context()
		id := grain.NewID("hook", "h")
		_, err = s.Ask(ctx, id, "hi")
		require.NoError(t, err)
		require.NoError(t, s.Deactivate(ctx, id))
		<-in
		began := time.Now()
		cause := <-out
		assert.Equal(t, time.Minute, time.Since(began), "the hook's ctx ended at its deadline")
		require.ErrorIs(t, cause, context.DeadlineExceeded)
		assert.Contains(t, cause.Error(), "DeactivationTimeout")
		v, err := s.Ask(ctx, id, "again") // a fresh activation, once the hook has returned
		require.NoError(t, err)
		assert.Equal(t, "ok", v)
	})
}

// Two Shutdowns at once, as two signal handlers might call it: the second
// waits for the stop the first began, and the first whose ctx ends closes
// the silo for both — it returns its ctx's error, the other nil (the silo
// did stop), and the ask waiting behind the blocked turn fails with
// ErrSiloClosed.
func TestConcurrentShutdownsShareOneStop(t *testing.T) {
	e := newLife(t, silo.Config{})
	id := e.id("a")
	gate := e.blockGrain(t, "a", 1)
	defer close(gate)
	pending := make(chan error, 1)
	go func() { _, err := e.s.Ask(e.ctx, id, get{}); pending <- err }()
	waitBacklog(t, e.s, 1)

	patient := make(chan error, 1)
	go func() { patient <- e.s.Shutdown(e.ctx) }()   // waits as long as the test
	for e.s.Tell(e.ctx, e.id("b"), incr{1}) == nil { // until it has begun
		runtime.Gosched()
	}
	sctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, e.s.Shutdown(sctx), context.DeadlineExceeded)
	require.NoError(t, <-patient, "the patient Shutdown: the silo stopped")
	require.ErrorIs(t, <-pending, grain.ErrSiloClosed)
	require.NoError(t, e.s.Shutdown(e.ctx), "a Shutdown after the stop")
	require.ErrorIs(t, e.s.Tell(e.ctx, id, incr{1}), grain.ErrSiloClosed)
}

// A Stop that comes while the grain deactivates — its OnDeactivate running,
// messages waiting to go to its next activation — draws the same line as
// any Stop: what was sent before it is a dead letter with reason stopped,
// what is sent after it goes to a fresh instance.
func TestAStopDuringOnDeactivateDrawsTheLine(t *testing.T) {
	e := newLife(t, silo.Config{})
	hang := e.hangFirstDeactivation()
	dl := e.s.SubscribeDeadLetters(8)
	defer dl.Cancel()
	id := e.id("a")
	e.call(t, "a", incr{1})
	require.NoError(t, e.s.Deactivate(e.ctx, id))
	require.Equal(t, "a", <-e.j.deact)                // OnDeactivate runs, and waits
	require.NoError(t, e.s.Tell(e.ctx, id, incr{10})) // before the Stop: waits for the next activation
	waitBacklog(t, e.s, 1)
	require.NoError(t, e.s.Stop(e.ctx, id))
	require.NoError(t, e.s.Tell(e.ctx, id, incr{100})) // after it
	got := make(chan any, 1)
	go func() { got <- e.call(t, "a", get{}) }()
	close(hang)
	assert.Equal(t, 100, <-got, "the fresh instance had only what was sent after the Stop")
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}))
	select {
	case d := <-dl.C:
		assert.Equal(t, grain.ReasonStopped, d.Reason)
		assert.Equal(t, incr{10}, d.Msg)
	case <-e.ctx.Done():
		t.Fatal("no dead letter for the tell sent before the Stop")
	}
	assert.Equal(t, uint64(1), e.s.Stats().DeadLetters[grain.ReasonStopped])
}

// A grain stopped by supervision (past its restart limit) is quarantined
// from the moment of its stop: a message that comes while its OnDeactivate
// still runs is a dead letter with reason quarantined, as one after it is,
// and an ask fails fast with ErrGrainStopped.
func TestMessagesDuringASupervisionStopAreQuarantined(t *testing.T) {
	sup := activation.Supervision{MaxRestarts: -1, Quarantine: 10 * time.Second} // no restart: the first failure stops it
	e := newLife(t, silo.Config{}, silo.WithSupervision(sup))
	hang := make(chan struct{})
	e.tweak = func(l *life) { l.deactHang = hang }
	dl := e.s.SubscribeDeadLetters(8)
	defer dl.Cancel()
	id := e.id("a")
	_, err := e.s.Ask(e.ctx, id, boom{1}) // past the limit at once: stop
	require.ErrorIs(t, err, grain.ErrPanic)
	require.Equal(t, "a", <-e.j.deact) // OnDeactivate runs, and waits
	require.NoError(t, e.s.Tell(e.ctx, id, incr{1}))
	_, err = e.s.Ask(e.ctx, id, get{})
	require.ErrorIs(t, err, grain.ErrGrainStopped)
	for range 2 {
		select {
		case d := <-dl.C:
			assert.Equal(t, grain.ReasonQuarantined, d.Reason, "%v", d.Msg)
		case <-e.ctx.Done():
			t.Fatal("no dead letter")
		}
	}
	close(hang)
	_, err = e.s.Ask(e.ctx, id, get{})
	require.ErrorIs(t, err, grain.ErrGrainStopped, "gone, and still quarantined")
	e.clk.Advance(10 * time.Second)
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}), "after quarantine, a fresh activation")
}

// A grain stopped by supervision whose OnDeactivate outlasts its quarantine:
// a message that comes once the quarantine is over waits for the fresh
// instance, as the quarantine promises — it was a dead letter (stopped)
// for as long as the old instance was not gone.
func TestAMessageAfterTheQuarantineWaitsForTheFreshInstance(t *testing.T) {
	sup := activation.Supervision{MaxRestarts: -1, Quarantine: 10 * time.Second} // the first failure stops it
	e := newLife(t, silo.Config{Partitions: 1}, silo.WithSupervision(sup))
	hang := e.hangFirstDeactivation()
	dl := e.s.SubscribeDeadLetters(8)
	defer dl.Cancel()
	id := e.id("a")
	_, err := e.s.Ask(e.ctx, id, boom{1})
	require.ErrorIs(t, err, grain.ErrPanic)
	require.Equal(t, "a", <-e.j.deact) // OnDeactivate runs, and waits
	e.clk.Advance(10 * time.Second)    // the quarantine is over; the old instance is not gone
	require.NoError(t, e.s.Tell(e.ctx, id, incr{5}))
	e.call(t, "b", get{}) // a barrier: the tell is delivered (one partition)
	close(hang)
	assert.Equal(t, 2, e.call(t, "a", whoAmI{}), "the fresh instance")
	assert.Equal(t, 5, e.call(t, "a", get{}), "which had the tell sent after the quarantine")
	select {
	case d := <-dl.C:
		t.Fatalf("a dead letter: %v (%v)", d.Msg, d.Reason)
	default:
	}
}
