package silo_test

import (
	"context"
	"errors"
	"fmt"
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

func TestTellThenCall(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	ctx := ctxT(t)
	id := grain.NewID("counter", "a")
	for range 100 {
		require.NoError(t, s.Tell(ctx, id, incr{1}))
	}
	n, err := silo.Call[int](ctx, s, id, get{})
	require.NoError(t, err)
	assert.Equal(t, 100, n)
	st := s.Stats()
	assert.Equal(t, 1, st.Activations["counter"])
	require.NoError(t, s.Shutdown(ctx))
}

func TestIntAndStringKeysAreDistinct(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	ctx := ctxT(t)
	require.NoError(t, s.Tell(ctx, grain.NewIntID("counter", 7), incr{5}))
	n, err := silo.Call[int](ctx, s, grain.NewID("counter", "7"), get{})
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	n, err = silo.Call[int](ctx, s, grain.NewIntID("counter", 7), get{})
	require.NoError(t, err)
	assert.Equal(t, 5, n)
}

func TestBadInputIsRefusedAtTheCallSite(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	ctx := ctxT(t)
	cases := []struct {
		name string
		id   grain.ID
		msg  any
		want error
	}{
		{"unknown kind", grain.NewID("nope", "a"), get{}, grain.ErrUnknownKind},
		{"empty kind", grain.NewID("", "a"), get{}, grain.ErrEmptyKind},
		{"empty key", grain.NewID("counter", ""), get{}, grain.ErrEmptyKey},
		{"zero id", grain.ID{}, get{}, grain.ErrEmptyKind},
		{"bad kind", grain.NewID("a/b", "x"), get{}, grain.ErrInvalidKind},
		{"nil message", grain.NewID("counter", "a"), nil, grain.ErrNilMessage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, s.Tell(ctx, c.id, c.msg), c.want)
			_, err := s.Ask(ctx, c.id, c.msg)
			require.ErrorIs(t, err, c.want)
		})
	}
	st := s.Stats()
	assert.Zero(t, st.Handled, "nothing may be enqueued for bad input")
	assert.Empty(t, st.DeadLetters)
}

// A nil silo, caller or kind option is refused or skipped, never a panic in
// the caller.
func TestNilSiloCallerAndOption(t *testing.T) {
	ctx := ctxT(t)
	id := grain.NewID("counter", "a")
	var ns *silo.Silo
	require.ErrorIs(t, silo.Register(ns, "counter", func(grain.ID) *counter { return &counter{} }), silo.ErrSiloClosed)
	require.ErrorIs(t, ns.Tell(ctx, id, get{}), silo.ErrSiloClosed)
	_, err := ns.Ask(ctx, id, get{})
	require.ErrorIs(t, err, silo.ErrSiloClosed)
	require.ErrorIs(t, ns.Stop(ctx, id), silo.ErrSiloClosed)
	_, err = silo.Call[int](ctx, nil, id, get{})
	require.ErrorIs(t, err, silo.ErrSiloClosed)

	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }, nil, silo.WithIdleTimeout(time.Minute)))
		err := silo.Register(s, "", func(grain.ID) *counter { return &counter{} })
		require.ErrorIs(t, err, grain.ErrEmptyKind)
		require.EqualError(t, err, `granary: empty grain kind: kind ""`)
	})
	n, err := silo.Call[int](ctx, s, id, incr{2})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

// A nil ctx is bad input like any other: a typed error, not a panic in the
// caller, and nothing sent or stopped.
func TestNilContextIsRefused(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	id := grain.NewID("counter", "a")
	var nilCtx context.Context
	require.ErrorIs(t, s.Tell(nilCtx, id, incr{1}), silo.ErrNilContext)
	_, err := s.Ask(nilCtx, id, get{})
	require.ErrorIs(t, err, silo.ErrNilContext)
	_, err = silo.Call[int](nilCtx, s, id, get{})
	require.ErrorIs(t, err, silo.ErrNilContext)
	require.ErrorIs(t, s.Deactivate(nilCtx, id), silo.ErrNilContext)
	require.ErrorIs(t, s.Stop(nilCtx, id), silo.ErrNilContext)
	require.ErrorIs(t, s.Shutdown(nilCtx), silo.ErrNilContext)
	// Nor does marking a nil ctx panic, as context.WithValue would: the
	// call made with it is refused.
	_, err = s.Ask(silo.AllowCallChainReentrancy(nilCtx), id, get{})
	require.ErrorIs(t, err, silo.ErrNilContext)

	ctx := ctxT(t)
	n, err := silo.Call[int](ctx, s, id, get{})
	require.NoError(t, err, "the silo still runs")
	assert.Zero(t, n, "nothing was sent")
	assert.Equal(t, uint64(1), s.Stats().Handled, "a call's turn is counted once its caller has the reply")
}

// A Silo must come from New; its zero value refuses everything with
// ErrSiloClosed, saying so, instead of panicking.
func TestZeroSiloIsRefused(t *testing.T) {
	var s silo.Silo
	ctx := ctxT(t)
	id := grain.NewID("counter", "a")
	notNew := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, silo.ErrSiloClosed)
		assert.Contains(t, err.Error(), "silo.New")
	}
	notNew(silo.Register(&s, "counter", func(grain.ID) *counter { return &counter{} }))
	notNew(s.Start())
	notNew(s.Tell(ctx, id, incr{1}))
	_, err := s.Ask(ctx, id, get{})
	notNew(err)
	notNew(s.Stop(ctx, id))
	notNew(s.Shutdown(ctx))
	notNew(s.Close())
	<-s.Done() // nothing runs: already done
	assert.Zero(t, s.Stats().Handled)
	dl := s.SubscribeDeadLetters(1)
	_, open := <-dl.C
	assert.False(t, open, "no dead letter will ever come")
	dl.Cancel()

	var nilSilo *silo.Silo
	assert.Zero(t, nilSilo.Stats().Handled)
	_, open = <-nilSilo.SubscribeDeadLetters(1).C
	assert.False(t, open)
	<-nilSilo.Done()

	var nilSub *silo.DeadLetters
	nilSub.Cancel() // nothing to cancel: no panic
	assert.Zero(t, nilSub.Dropped())
}

func TestWrongReplyType(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	ctx := ctxT(t)
	id := grain.NewID("counter", "a")
	_, err := silo.Call[string](ctx, s, id, get{})
	var rte *grain.ReplyTypeError
	require.ErrorAs(t, err, &rte)
	require.ErrorIs(t, err, grain.ErrWrongReplyType)
	assert.Equal(t, "string", rte.Want)
	assert.Equal(t, "int", rte.Got)

	// A nil reply is the zero value of a nillable T, and an error otherwise.
	v, err := silo.Call[error](ctx, s, id, echo{nil})
	require.NoError(t, err)
	assert.Nil(t, v)
	_, err = silo.Call[int](ctx, s, id, incr{0})
	require.NoError(t, err)
}

func TestSiloLifecycle(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	ctx := ctxT(t)
	id := grain.NewID("counter", "a")

	require.ErrorIs(t, s.Tell(ctx, id, get{}), grain.ErrSiloClosed, "not started")
	require.ErrorIs(t, s.Tell(ctx, id, get{}), silo.ErrNotStarted)
	require.ErrorIs(t, s.Stop(ctx, id), silo.ErrNotStarted)
	require.NoError(t, s.Start())
	require.ErrorIs(t, s.Start(), grain.ErrAlreadyStarted)
	require.ErrorIs(t, silo.Register(s, "late", func(grain.ID) *counter { return &counter{} }), grain.ErrAlreadyStarted)
	require.NoError(t, s.Tell(ctx, id, incr{1}))
	require.NoError(t, s.Shutdown(ctx))
	require.ErrorIs(t, s.Tell(ctx, id, get{}), grain.ErrSiloClosed)
	require.NotErrorIs(t, s.Tell(ctx, id, get{}), silo.ErrNotStarted, "shut down, not unstarted")
	_, err = s.Ask(ctx, id, get{})
	require.ErrorIs(t, err, grain.ErrSiloClosed)
	require.ErrorIs(t, s.Start(), grain.ErrSiloClosed, "not reusable")
	require.NoError(t, s.Shutdown(ctx), "second shutdown")
	// Once stopped, a Shutdown with an ended ctx — a deferred one, the
	// program's ctx cancelled — is nil every time, not a coin toss between
	// the stop it waits for and its ctx.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for range 50 {
		require.NoError(t, s.Shutdown(ended), "shutdown of a stopped silo with an ended ctx")
	}
	require.NoError(t, s.Close(), "close after shutdown")
	for i, d := range s.Stats().QueueDepth {
		assert.Zero(t, d, "partition %d of a stopped silo has nothing waiting", i)
	}
}

func TestCloseBeforeStart(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Shutdown(context.Background()))
	require.ErrorIs(t, s.Start(), grain.ErrSiloClosed)
	require.ErrorIs(t, silo.Register(s, "late", func(grain.ID) *counter { return &counter{} }), grain.ErrSiloClosed)
}

func TestRegisterErrors(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()
	f := func(grain.ID) *counter { return &counter{} }
	require.NoError(t, silo.Register(s, "c", f))
	require.ErrorIs(t, silo.Register(s, "c", f), grain.ErrAlreadyRegistered)
	require.ErrorIs(t, silo.Register(s, "", f), grain.ErrEmptyKind)
	require.ErrorIs(t, silo.Register(s, "a#b", f), grain.ErrInvalidKind)
	require.ErrorIs(t, silo.Register[*counter](s, "d", nil), grain.ErrInvalidConfig)
	require.ErrorIs(t, silo.Register(s, "e", f, silo.WithMaxBacklog(-1, silo.RejectNewest)), grain.ErrInvalidConfig)
	require.ErrorIs(t, silo.Register(s, "e", f, silo.WithMaxBacklog(5, silo.Overflow(7))), grain.ErrInvalidConfig, "no such policy")
	require.ErrorIs(t, silo.Register(s, "f", f, silo.WithIdleTimeout(0)), grain.ErrInvalidConfig, "0 could mean never or at once")
	require.NoError(t, silo.Register(s, "g", f, silo.WithIdleTimeout(-1)), "negative: never idle")
	require.ErrorIs(t, silo.Register(s, "h", f, silo.WithSupervision(activation.Supervision{Window: -time.Second})), grain.ErrInvalidConfig)
	require.ErrorIs(t, silo.Register(s, "i", f, silo.WithSupervision(activation.Supervision{Decider: activation.DeciderFunc(nil)})), grain.ErrInvalidConfig,
		"a nil DeciderFunc would panic at every failure")
}

func TestInvalidConfig(t *testing.T) {
	for _, cfg := range []silo.Config{
		{Partitions: -1},
		{Partitions: silo.MaxPartitions + 1}, // a million: about 22 GB, and Start not done after 70 s
		{CallTimeout: -time.Second},
		{MaxActivations: -5},
		{HandoffThreshold: -1},
		{HandoffThreshold: time.Nanosecond}, // the watchdog would spin
		{QueueCapacity: -1},
		{IdleQuantum: time.Microsecond},
		{DeactivationTimeout: -time.Second},
		{MemoryLimit: -1},
		{MaxBacklog: -1},
		{LogSampling: silo.LogSampling{Tick: -time.Second}},
		{Supervision: activation.Supervision{MinBackoff: time.Second, MaxBackoff: time.Millisecond}},
		{Clock: (*clock.Manual)(nil)}, // declared, never made: Start would panic on it
		{Supervision: activation.Supervision{Decider: activation.ContextDeciderFunc(nil)}},
	} {
		_, err := silo.New(cfg)
		require.ErrorIs(t, err, grain.ErrInvalidConfig, "%+v", cfg)
	}
}

func TestHandlerErrorAndPanicReachTheCaller(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	ctx := ctxT(t)
	id := grain.NewID("counter", "a")
	sentinel := errors.New("nope")
	_, err := s.Ask(ctx, id, fail{sentinel})
	require.ErrorIs(t, err, sentinel)

	_, err = s.Ask(ctx, id, boom{"kaput"})
	var pe *grain.PanicError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, grain.ErrPanic)
	assert.Equal(t, "kaput", pe.Value)
	assert.Contains(t, pe.Stack(), "counter")

	// The partition goroutine survived: the silo still serves.
	n, err := silo.Call[int](ctx, s, id, incr{2})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "restarted by default: a fresh instance")
}

func TestCallHonoursDeadlineAndCancellation(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	ctx := ctxT(t)
	id := grain.NewID("counter", "slow")

	// Deadline: the caller gets a TimeoutError while the handler still runs.
	release := make(chan struct{})
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := s.Ask(dctx, id, hold{release})
	close(release)
	var te *grain.TimeoutError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, grain.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A deadline already past when the call is made: the same TimeoutError,
	// and nothing is sent — so no dead letter, as for a cancelled ctx (and
	// as for a Tell): the caller holds the error.
	past, cancel4 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel4()
	_, err = s.Ask(past, id, incr{1})
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	gone, cancel5 := context.WithCancel(ctx)
	cancel5()
	_, err = s.Ask(gone, grain.NewID("counter", "never"), incr{1})
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorAs(t, err, &te, "a cancelled call did not time out")
	assert.Empty(t, s.Stats().DeadLetters, "nothing was sent")
	assert.Equal(t, 1, s.Stats().Activations["counter"], "only the slow grain is active: nothing went to \"never\"")

	// The handler's ctx ends with the caller's deadline.
	started := make(chan struct{})
	dctx2, cancel3 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel3()
	_, err = s.Ask(dctx2, id, waitCtx{started})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Cancellation: the caller gets context.Canceled.
	started = make(chan struct{})
	cctx, cancel2 := context.WithCancel(ctx)
	go func() { <-started; cancel2() }()
	_, err = s.Ask(cctx, id, waitCtx{started})
	require.ErrorIs(t, err, context.Canceled)

	// The default call timeout applies when ctx has no deadline.
	s2 := newSilo(t, silo.Config{CallTimeout: 30 * time.Millisecond}, nil)
	release2 := make(chan struct{})
	defer close(release2)
	_, err = s2.Ask(context.Background(), id, hold{release2})
	require.ErrorIs(t, err, grain.ErrTimeout)
}

type failingActivator struct {
	counter
	err   error
	panic bool
}

func (f *failingActivator) OnActivate(context.Context, *grain.Context) error {
	if f.panic {
		panic("activate kaput")
	}
	return f.err
}

func TestActivationFailure(t *testing.T) {
	cause := errors.New("storage down")
	var attempts atomic.Int32
	var healthy atomic.Bool
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "flaky", func(grain.ID) *failingActivator {
			attempts.Add(1)
			if healthy.Load() {
				return &failingActivator{}
			}
			return &failingActivator{err: cause}
		}))
		require.NoError(t, silo.Register(s, "panicky", func(grain.ID) *failingActivator {
			return &failingActivator{panic: true}
		}))
		require.NoError(t, silo.Register(s, "nilfactory", func(grain.ID) *counter { return nil }))
	})
	ctx := ctxT(t)
	dl := s.SubscribeDeadLetters(16)
	defer dl.Cancel()

	id := grain.NewID("flaky", "a")
	_, err := s.Ask(ctx, id, get{})
	var ae *grain.ActivationError
	require.ErrorAs(t, err, &ae)
	require.ErrorIs(t, err, cause)
	require.ErrorIs(t, err, grain.ErrActivation)
	st := s.Stats()
	assert.Equal(t, 0, st.Activations["flaky"], "nothing left in the directory")
	assert.Equal(t, uint64(1), st.DeadLetters[grain.ReasonActivationFailed], "counted before the caller hears")
	d := <-dl.C
	assert.Equal(t, grain.ReasonActivationFailed, d.Reason)

	healthy.Store(true)
	n, err := silo.Call[int](ctx, s, id, incr{1})
	require.NoError(t, err, "the next message tries a fresh activation")
	assert.Equal(t, 1, n)
	assert.Equal(t, int32(2), attempts.Load())

	_, err = s.Ask(ctx, grain.NewID("panicky", "a"), get{})
	require.ErrorIs(t, err, grain.ErrActivation)
	require.ErrorIs(t, err, grain.ErrPanic)

	_, err = s.Ask(ctx, grain.NewID("nilfactory", "a"), get{})
	require.ErrorIs(t, err, grain.ErrActivation)
}

// activationQueue holds its activation until released, to queue messages
// behind it.
type gatedActivator struct {
	counter
	gate <-chan struct{}
	err  error
}

func (g *gatedActivator) OnActivate(ctx context.Context, _ *grain.Context) error {
	<-g.gate
	return g.err
}

func TestMessagesQueuedBehindAFailedActivationAllFail(t *testing.T) {
	gate := make(chan struct{})
	cause := errors.New("no")
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "gated", func(grain.ID) *gatedActivator {
			return &gatedActivator{gate: gate, err: cause}
		}))
	})
	ctx := ctxT(t)
	dl := s.SubscribeDeadLetters(64)
	defer dl.Cancel()
	id := grain.NewID("gated", "a")
	const asks, tells = 5, 5
	errs := make(chan error, asks)
	for range asks {
		go func() { _, err := s.Ask(ctx, id, get{}); errs <- err }()
	}
	for range tells {
		require.NoError(t, s.Tell(ctx, id, incr{1}))
	}
	// Every message is queued once this ask is queued behind them... and
	// they all wait on the gate. Release it.
	close(gate)
	for range asks {
		err := <-errs
		require.ErrorIs(t, err, cause)
		require.ErrorIs(t, err, grain.ErrActivation)
	}
	for range asks + tells {
		d := <-dl.C
		assert.Equal(t, grain.ReasonActivationFailed, d.Reason)
		require.ErrorIs(t, d.Err, cause)
	}
}

func TestTwoSilosInOneProcess(t *testing.T) {
	a := newSilo(t, silo.Config{Name: "a"}, nil)
	b := newSilo(t, silo.Config{Name: "b"}, nil)
	ctx := ctxT(t)
	id := grain.NewID("counter", "x")
	require.NoError(t, a.Tell(ctx, id, incr{3}))
	n, err := silo.Call[int](ctx, b, id, get{})
	require.NoError(t, err)
	assert.Equal(t, 0, n, "silos share nothing")
	n, err = silo.Call[int](ctx, a, id, get{})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

func TestConcurrentFirstMessagesActivateOnce(t *testing.T) {
	var built atomic.Int32
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { built.Add(1); return &counter{} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("counter", "hot")
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { _, err := s.Ask(ctx, id, incr{1}); assert.NoError(t, err) })
	}
	wg.Wait()
	assert.Equal(t, int32(1), built.Load())
	n, err := silo.Call[int](ctx, s, id, get{})
	require.NoError(t, err)
	assert.Equal(t, 64, n)
}

func ExampleCall() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "greeter", func(id grain.ID) grain.Func {
		return func(_ context.Context, c *grain.Context, msg any) (any, error) {
			return fmt.Sprintf("hello %v from %s", msg, c.ID().Key()), nil
		}
	})
	_ = s.Start()
	defer s.Close()

	ctx := context.Background()
	reply, err := silo.Call[string](ctx, s, grain.NewID("greeter", "bob"), "alice")
	fmt.Println(reply, err)
	_, err = silo.Call[int](ctx, s, grain.NewID("greeter", "bob"), "alice")
	fmt.Println(err)
	// Output:
	// hello alice from bob <nil>
	// granary: reply from greeter/bob is string, want int
}

// Sends and Stats before Start race nothing with Register (run with -race).
func TestUseBeforeStartIsSafe(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			_ = silo.Register(s, fmt.Sprintf("k%d", i), func(grain.ID) *counter { return &counter{} })
		}
	}()
	for range 200 {
		require.ErrorIs(t, s.Tell(context.Background(), grain.NewID("k1", "a"), get{}), grain.ErrSiloClosed)
		_ = s.Stats()
	}
	<-done
	assert.Len(t, s.Stats().Activations, 50)
}
