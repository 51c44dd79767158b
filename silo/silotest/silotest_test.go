package silotest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/silo/silotest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// alarm tells whoever asked, once its timer fires, that it rang.
type alarm struct{ notify grain.ID }

type (
	setAlarm struct {
		in time.Duration
		to grain.ID
	}
	ring struct{}
)

func (a *alarm) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case setAlarm:
		a.notify = m.to
		return nil, c.StartTimer("ring", m.in, 0, ring{})
	case ring:
		return nil, c.Silo().Tell(ctx, a.notify, "rang")
	case string:
		return nil, errors.New(m)
	}
	return nil, fmt.Errorf("alarm: unexpected %T", msg)
}

func register(s *silo.Silo) error {
	return silo.Register(s, "alarm", func(grain.ID) *alarm { return &alarm{} })
}

// A probe wakes the test when the grain's timer has done its work.
func TestProbeReceivesWhatAGrainTells(t *testing.T) {
	s := silotest.Start(t, silo.Config{}, register)
	silotest.NoDeadLetters(t, s)
	probe := silotest.NewProbe(t, s)
	id := grain.NewID("alarm", "a")
	_, err := s.Ask(t.Context(), id, setAlarm{in: time.Millisecond, to: probe.ID()})
	require.NoError(t, err)
	n := probe.Expect("rang")
	assert.Equal(t, id, n.Sender)
	probe.ExpectNone(time.Millisecond)
}

// fakeT records what a helper reports; Fatalf ends its goroutine, as the
// testing package's does.
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	msgs     []string
	failed   bool
	cleanups []func()
	logs     []string
}

func (f *fakeT) Log(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprint(args...))
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// run runs body as a test body on its own goroutine, then the cleanups,
// last first; it returns what was reported.
func (f *fakeT) run(body func()) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		body()
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return strings.Join(f.msgs, "\n")
}

// Each helper fails the test, saying what it saw, when what it waits for
// does not happen.
func TestHelpersFailTheTest(t *testing.T) {
	s := silotest.Start(t, silo.Config{}, register)
	id := grain.NewID("alarm", "b")

	f := &fakeT{TB: t}
	out := f.run(func() {
		p := silotest.NewProbe(f, s)
		p.Timeout = time.Millisecond
		p.Receive()
		t.Error("Receive returned with nothing received")
	})
	assert.Contains(t, out, "nothing within 1ms")

	f = &fakeT{TB: t}
	out = f.run(func() {
		p := silotest.NewProbe(f, s)
		_, err := s.Ask(t.Context(), id, setAlarm{in: time.Millisecond, to: p.ID()})
		assert.NoError(t, err)
		p.Expect("snoozed")
	})
	assert.Contains(t, out, `expected "snoozed", got "rang" (from alarm/b)`)

	f = &fakeT{TB: t}
	out = f.run(func() {
		p := silotest.NewProbe(f, s)
		assert.NoError(t, s.Tell(t.Context(), p.ID(), "early"))
		p.ExpectNone(time.Millisecond)
	})
	assert.Contains(t, out, `expected nothing, got "early" (sent from outside any grain)`)

	f = &fakeT{TB: t}
	out = f.run(func() {
		silotest.NoDeadLetters(f, s)
		_, err := s.Ask(t.Context(), grain.NewID("alarm", "c"), setAlarm{in: time.Hour, to: grain.NewID("nowhere", "x")})
		assert.NoError(t, err)
		assert.NoError(t, s.Stop(t.Context(), grain.NewID("alarm", "c")))
		_, err = s.Ask(t.Context(), grain.NewID("alarm", "c"), "boom") // a fresh instance answers
		assert.Error(t, err)
		o, err := s.NewObserver(1)
		assert.NoError(t, err)
		o.Close()
		assert.ErrorIs(t, s.Tell(t.Context(), o.ID(), "late"), grain.ErrObserverClosed)
	})
	assert.Contains(t, out, "dead letters (1), where none was expected")
	assert.Contains(t, out, `(outside any grain) → granary.observer/`)
	assert.Contains(t, out, `: "late" (observer closed)`)
	assert.True(t, f.failed)

	f = &fakeT{TB: t}
	out = f.run(func() {
		p := silotest.NewProbe(f, s)
		assert.NoError(t, s.Tell(t.Context(), p.ID(), "a string"))
		silotest.ExpectType[int](p)
		t.Error("ExpectType returned a message of another type")
	})
	assert.Contains(t, out, `expected a message of type int, got "a string"`)

	f = &fakeT{TB: t}
	out = f.run(func() {
		p := silotest.NewProbe(f, s)
		p.Timeout = time.Millisecond
		assert.NoError(t, s.Tell(t.Context(), p.ID(), "only one"))
		p.ReceiveN(2)
		t.Error("ReceiveN returned short")
	})
	assert.Contains(t, out, "expected 2 notifications, got 1: nothing within 1ms")

	f = &fakeT{TB: t}
	out = f.run(func() {
		silotest.Start(f, silo.Config{Partitions: -1}, nil)
		t.Error("Start returned a silo it could not make")
	})
	assert.Contains(t, out, "silotest: New: granary: invalid config")

	f = &fakeT{TB: t}
	out = f.run(func() {
		silotest.Start(f, silo.Config{}, func(*silo.Silo) error { return errors.New("no kinds today") })
	})
	assert.Contains(t, out, "registering kinds: no kinds today")
}

// ReceiveN returns notifications in the order told; ExpectType returns the
// message as its type, for assertions on its fields.
func TestProbeReceiveNAndExpectType(t *testing.T) {
	s := silotest.Start(t, silo.Config{}, register)
	p := silotest.NewProbe(t, s)
	for i := range 3 {
		require.NoError(t, s.Tell(t.Context(), p.ID(), i))
	}
	got := p.ReceiveN(3)
	require.Len(t, got, 3)
	for i, n := range got {
		assert.Equal(t, i, n.Msg)
	}
	assert.Empty(t, p.ReceiveN(0))

	id := grain.NewID("alarm", "f")
	_, err := s.Ask(t.Context(), id, setAlarm{in: time.Millisecond, to: p.ID()})
	require.NoError(t, err)
	assert.Equal(t, "rang", silotest.ExpectType[string](p))
}

// A log returns what was published before the call, in order.
func TestDeadLetterLogAll(t *testing.T) {
	s := silotest.Start(t, silo.Config{}, register)
	log := silotest.RecordDeadLetters(t, s)
	assert.Empty(t, log.All())
	o, err := s.NewObserver(1)
	require.NoError(t, err)
	o.Close()
	for _, m := range []string{"one", "two"} {
		require.ErrorIs(t, s.Tell(t.Context(), o.ID(), m), grain.ErrObserverClosed)
	}
	all := log.All()
	require.Len(t, all, 2)
	assert.Equal(t, "one", all[0].Msg)
	assert.Equal(t, "two", all[1].Msg)
	assert.Len(t, log.All(), 2, "kept")
}

// The silo shuts down with the test: OnDeactivate runs, and a test may
// stop it first.
func TestStartShutsDownWithTheTest(t *testing.T) {
	var s *silo.Silo
	t.Run("inner", func(t *testing.T) {
		s = silotest.Start(t, silo.Config{}, register)
		_, err := s.Ask(t.Context(), grain.NewID("alarm", "d"), setAlarm{in: time.Hour, to: grain.NewID("alarm", "d")})
		require.NoError(t, err)
	})
	select {
	case <-s.Done():
	default:
		t.Fatal("the silo outlived its test")
	}
	t.Run("closed by the test", func(t *testing.T) {
		s := silotest.Start(t, silo.Config{}, register)
		require.NoError(t, s.Close())
	})
}

// A silo Start makes with no Logger logs to the test: a tell's failure
// shows with the test that caused it.
func TestStartLogsToTheTest(t *testing.T) {
	f := &fakeT{TB: t}
	f.run(func() {
		s := silotest.Start(f, silo.Config{}, register)
		id := grain.NewID("alarm", "e")
		require.NoError(t, s.Tell(t.Context(), id, "out of batteries"))   // the alarm fails it
		_, err := s.Ask(t.Context(), id, setAlarm{in: time.Hour, to: id}) // a barrier
		require.NoError(t, err)
	})
	require.Len(t, f.logs, 1)
	assert.Contains(t, f.logs[0], `level=WARN msg="granary: a tell's turn failed, with no caller to return the error to" grain=alarm/e err="out of batteries"`)
	assert.NotContains(t, f.logs[0], "\n", "one line, with no newline of its own")
	assert.False(t, f.failed)
}

// In a testing/synctest bubble the waits run on fake time: an alarm an
// hour away rings at once, and ExpectNone's hour costs nothing.
func TestProbeInASynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// An idle timeout past the alarm: a timer does not keep its grain
		// active, and one deactivated before it fires never rings.
		s := silotest.Start(t, silo.Config{IdleTimeout: 2 * time.Hour}, register)
		probe := silotest.NewProbe(t, s)
		probe.Timeout = 2 * time.Hour
		start := time.Now()
		_, err := s.Ask(t.Context(), grain.NewID("alarm", "e"), setAlarm{in: time.Hour, to: probe.ID()})
		require.NoError(t, err)
		probe.ExpectNone(59 * time.Minute)
		probe.Expect("rang")
		assert.Equal(t, time.Hour, time.Since(start).Round(time.Minute))
	})
}

// A silo that cannot shut down gracefully within DefaultTimeout when the
// test ends fails the test, saying so: a handler stuck past its ctx is
// not passed over in silence.
func TestStartFailsTheTestWhoseSiloCannotShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, began := make(chan struct{}), make(chan struct{})
		stuck := grain.Func(func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
			close(began)
			<-release // ignores its ctx
			return nil, nil
		})
		f := &fakeT{TB: t}
		start := time.Now()
		out := f.run(func() {
			s := silotest.Start(f, silo.Config{}, func(s *silo.Silo) error {
				return silo.Register(s, "stuck", func(grain.ID) grain.Func { return stuck })
			})
			assert.NoError(t, s.Tell(t.Context(), grain.NewID("stuck", "a"), "go"))
			<-began
		})
		took := time.Since(start)
		close(release)
		assert.True(t, f.failed)
		assert.Contains(t, out, "silotest: Shutdown at the end of the test: context deadline exceeded")
		assert.Equal(t, silotest.DefaultTimeout, took.Round(time.Second), "the cleanup waits DefaultTimeout, on the bubble's clock")
	})
}

// A silo Start makes checks its grains' Contexts: one a handler hands to
// a goroutine that uses it after the turn — pipe-to-self with gc.ID()
// read inside the goroutine — panics there, naming the grain, instead of
// reading another grain's turn.
func TestStartChecksContexts(t *testing.T) {
	kept := make(chan *grain.Context, 1)
	s := silotest.Start(t, silo.Config{}, func(s *silo.Silo) error {
		return silo.Register(s, "fetcher", func(grain.ID) grain.Func {
			return func(_ context.Context, c *grain.Context, msg any) (any, error) {
				kept <- c // as `go func() { ...; c.Silo().Tell(ctx, c.ID(), result) }()` would
				return nil, nil
			}
		})
	})
	id := grain.NewID("fetcher", "f")
	_, err := s.Ask(t.Context(), id, "fetch")
	require.NoError(t, err)
	c := <-kept
	v := func() (v any) {
		defer func() { v = recover() }()
		c.ID()
		return nil
	}()
	err, _ = v.(error)
	var after *grain.ContextAfterTurnError
	require.ErrorAs(t, err, &after, "panicked with %v", v)
	assert.Equal(t, id, after.ID)
	assert.Contains(t, err.Error(), "ID() on the Context of a turn of fetcher/f that had ended; copy what work that outlives the turn needs")
}
