package activation_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

func TestLifecycleTransitions(t *testing.T) {
	var a activation.Activation
	assert.Equal(t, activation.Activating, a.State())
	require.NoError(t, a.Transition(activation.Active))
	require.NoError(t, a.Transition(activation.Backoff))
	require.NoError(t, a.Transition(activation.Activating))
	require.NoError(t, a.Transition(activation.Active))
	require.NoError(t, a.Transition(activation.Deactivating))
	var te *activation.TransitionError
	require.ErrorAs(t, a.Transition(activation.Active), &te, "no way back from deactivating")
	assert.Equal(t, activation.Deactivating, a.State(), "a refused move changes nothing")
	require.NoError(t, a.Transition(activation.Gone))
	for _, s := range []activation.State{activation.Activating, activation.Active, activation.Backoff, activation.Deactivating, activation.Gone} {
		assert.False(t, activation.CanTransition(activation.Gone, s), "gone is terminal")
	}
	assert.False(t, activation.CanTransition(activation.State(99), activation.Gone))
	var fresh activation.Activation
	require.NoError(t, fresh.Transition(activation.Backoff), "a fresh record may wait out a restart's backoff")
	require.NoError(t, fresh.Transition(activation.Activating))
	assert.Equal(t, "backoff", activation.Backoff.String())
}

func TestMailboxFIFO(t *testing.T) {
	var m activation.Mailbox
	for i := range 10 {
		m.Push(queues.Envelope{Msg: i})
	}
	e, ok := m.Pop()
	require.True(t, ok)
	assert.Equal(t, 0, e.Msg)
	for i := 10; i < 20; i++ { // wraps and grows
		m.Push(queues.Envelope{Msg: i})
	}
	var got []any
	m.Drain(func(e queues.Envelope) { got = append(got, e.Msg) })
	assert.Equal(t, []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, got)
	_, ok = m.Pop()
	assert.False(t, ok)
	assert.Zero(t, m.Len())
}

type panicky struct{}

func (panicky) Receive(context.Context, *grain.Context, any) (any, error) { panic("boom") }
func (panicky) OnActivate(context.Context, *grain.Context) error          { panic(errors.New("wrapped")) }
func (panicky) OnDeactivate(context.Context, *grain.Context) error        { panic("bye") }

func TestRunRecoversPanics(t *testing.T) {
	id := grain.NewID("k", "a")
	c := grain.NewContext(id, grain.ID{}, nil, nil)
	_, err := activation.Run(t.Context(), panicky{}, &c, 1)
	var pe *grain.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "boom", pe.Value)
	assert.Equal(t, id, pe.ID)
	err = activation.Activate(t.Context(), panicky{}, &c)
	require.ErrorIs(t, err, grain.ErrPanic)
	require.EqualError(t, errors.Unwrap(err), "wrapped")
	require.ErrorIs(t, activation.Deactivate(t.Context(), panicky{}, &c), grain.ErrPanic)

	_, err = activation.Build(id, func(grain.ID) grain.Grain { return nil })
	require.Error(t, err)
	_, err = activation.Build(id, func(grain.ID) grain.Grain { panic("factory") })
	require.ErrorIs(t, err, grain.ErrPanic)
	_, err = activation.Build(id, nil) // bad input, not a panic of the grain's
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
}

var errFatal = errors.New("fatal")

func TestSupervisionDirectives(t *testing.T) {
	s := activation.Supervision{}.WithDefaults()
	var r activation.Restarts
	id := grain.NewID("k", "a")
	d, _ := s.Decide(&r, id, errors.New("plain error"), 0)
	assert.Equal(t, activation.Resume, d, "an error is an answer, not a failure")
	d, back := s.Decide(&r, id, &grain.PanicError{}, 0)
	assert.Equal(t, activation.Restart, d)
	assert.Zero(t, back, "the first restart is immediate")

	custom := activation.Supervision{Decider: activation.DeciderFunc(func(_ grain.ID, err error) activation.Directive {
		if errors.Is(err, errFatal) {
			return activation.Stop
		}
		return activation.Resume
	})}.WithDefaults()
	d, _ = custom.Decide(&r, id, errFatal, 0)
	assert.Equal(t, activation.Stop, d)

	// The zero policy is the default one, as its doc says, when used as it
	// is (its nil Decider was a nil dereference); a nil history keeps none.
	var zero activation.Supervision
	d, back = zero.Decide(nil, id, &grain.PanicError{}, 0)
	assert.Equal(t, activation.Restart, d)
	assert.Zero(t, back)
	d, _ = zero.Decide(nil, id, errors.New("plain error"), 0)
	assert.Equal(t, activation.Resume, d)
	var none *activation.Restarts
	assert.Zero(t, none.Count())
	var fresh activation.Restarts
	for range activation.DefaultMaxRestarts {
		d, _ = zero.Restart(&fresh, 0)
		require.Equal(t, activation.Restart, d)
	}
	d, _ = zero.Restart(&fresh, 0)
	assert.Equal(t, activation.Stop, d, "the default limit, not a zero one")
}

// A ContextDecider used where no turn gives it a ctx — Supervision.Decide,
// called by a runtime of one's own — is still called, with the failure and
// a ctx that carries nothing and never ends.
func TestAContextDeciderOutsideATurn(t *testing.T) {
	id := grain.NewID("k", "a")
	var gotID grain.ID
	var gotErr error
	var gotCtx context.Context
	policy := activation.Supervision{Decider: activation.ContextDeciderFunc(func(ctx context.Context, id grain.ID, err error) activation.Directive {
		gotCtx, gotID, gotErr = ctx, id, err
		return activation.Stop
	})}
	d, back := policy.Decide(nil, id, errFatal, 0)
	assert.Equal(t, activation.Stop, d)
	assert.Zero(t, back)
	assert.True(t, gotID.Equal(&id))
	assert.ErrorIs(t, gotErr, errFatal)
	require.NotNil(t, gotCtx)
	assert.Nil(t, gotCtx.Done(), "a ctx that never ends")
	assert.NoError(t, gotCtx.Err())

	// Through the interface a runtime with a turn uses, the ctx is the one given.
	type key struct{}
	ctx := context.WithValue(t.Context(), key{}, "turn")
	cd := policy.Decider.(activation.ContextDecider)
	assert.Equal(t, activation.Stop, cd.DecideContext(ctx, id, errFatal))
	assert.Equal(t, "turn", gotCtx.Value(key{}))
}

func TestRestartLimitAndBackoff(t *testing.T) {
	s := activation.Supervision{MaxRestarts: 4, Window: 10 * time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 25 * time.Millisecond}.WithDefaults()
	var r activation.Restarts
	id := grain.NewID("k", "a")
	p := &grain.PanicError{}
	var backs []time.Duration
	for i := range 4 {
		d, b := s.Decide(&r, id, p, time.Duration(i)*time.Second)
		require.Equal(t, activation.Restart, d)
		backs = append(backs, b)
	}
	assert.Equal(t, []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond}, backs, "exponential, capped")
	d, _ := s.Decide(&r, id, p, 4*time.Second)
	assert.Equal(t, activation.Stop, d, "past the limit within the window")

	// Restarts older than the window are forgotten.
	var r2 activation.Restarts
	for i := range 10 {
		d, _ := s.Decide(&r2, id, p, time.Duration(i)*5*time.Second)
		require.Equal(t, activation.Restart, d, "restart %d", i)
	}
	assert.LessOrEqual(t, r2.Count(), 2)

	never := activation.Supervision{MaxRestarts: -1}.WithDefaults()
	d, _ = never.Decide(&activation.Restarts{}, id, p, 0)
	assert.Equal(t, activation.Stop, d)
}

func TestSupervisionValidate(t *testing.T) {
	require.NoError(t, activation.Supervision{}.Validate())
	require.ErrorIs(t, activation.Supervision{Window: -1}.Validate(), grain.ErrInvalidConfig)
	require.ErrorIs(t, activation.Supervision{MinBackoff: 2, MaxBackoff: 1}.Validate(), grain.ErrInvalidConfig)
	// A typed nil Decider would panic at every failure: refused, named.
	for _, d := range []activation.Decider{activation.DeciderFunc(nil), activation.ContextDeciderFunc(nil), (*panickyDecider)(nil)} {
		err := activation.Supervision{Decider: d}.Validate()
		require.ErrorIs(t, err, grain.ErrInvalidConfig, "%T", d)
		assert.Contains(t, err.Error(), fmt.Sprintf("a nil %T", d))
	}
	require.NoError(t, activation.Supervision{Decider: &panickyDecider{}}.Validate())
}

// panickyDecider reads its receiver: a nil one panics.
type panickyDecider struct{ d activation.Directive }

func (p *panickyDecider) Decide(grain.ID, error) activation.Directive { return p.d }

// Restart is what Decide does once the Decider chose Restart.
func TestSupervisionRestartMatchesDecide(t *testing.T) {
	s := activation.Supervision{MaxRestarts: 2, Window: time.Minute}.WithDefaults()
	id := grain.NewID("k", "a")
	panicked := &grain.PanicError{ID: id, Value: "x"}
	var viaDecide, viaRestart activation.Restarts
	for i := range 4 {
		now := time.Duration(i) * time.Second
		d1, b1 := s.Decide(&viaDecide, id, panicked, now)
		d2, b2 := s.Restart(&viaRestart, now)
		require.Equal(t, d1, d2, "restart %d", i)
		require.Equal(t, b1, b2, "restart %d", i)
	}
	require.Equal(t, viaDecide.Count(), viaRestart.Count())
}

// Backoffs double up to MaxBackoff and never wrap: with a MaxBackoff of
// "forever" and a long restart history, a doubling past the largest
// Duration would turn negative — a restart at once, where the policy asked
// for the longest wait.
func TestBackoffDoublingSaturates(t *testing.T) {
	s := activation.Supervision{MaxRestarts: 200, Window: time.Duration(math.MaxInt64), MinBackoff: time.Millisecond, MaxBackoff: time.Duration(math.MaxInt64)}
	var r activation.Restarts
	prev := time.Duration(0)
	for i := range 150 {
		d, b := s.Restart(&r, time.Duration(i))
		require.Equal(t, activation.Restart, d, "restart %d", i)
		require.GreaterOrEqual(t, b, prev, "restart %d: backoff %v after %v", i, b, prev)
		prev = b
	}
	require.Equal(t, time.Duration(math.MaxInt64), prev)
}

// The default decider restarts a grain on its own panic only: one that
// returns the error of a grain it called, which panicked, resumes.
func TestDefaultDeciderRestartsOnTheGrainsOwnPanicOnly(t *testing.T) {
	alice, auditor := grain.NewID("account", "alice"), grain.NewID("auditor", "x")
	own := &grain.PanicError{ID: alice, Value: "bug"}
	callee := &grain.PanicError{ID: auditor, Value: "auditor bug"}
	for _, c := range []struct {
		name string
		err  error
		want activation.Directive
	}{
		{"its own panic", own, activation.Restart},
		{"its own panic, wrapped", fmt.Errorf("turn: %w", own), activation.Restart},
		{"a panic naming no grain", &grain.PanicError{Value: "?"}, activation.Restart},
		{"a callee's panic, returned", callee, activation.Resume},
		{"a callee's panic, wrapped", fmt.Errorf("audit: %w", callee), activation.Resume},
		{"its own panic with a callee's error as the value", &grain.PanicError{ID: alice, Value: callee}, activation.Restart},
		{"an error", errors.New("no"), activation.Resume},
	} {
		assert.Equal(t, c.want, activation.DefaultDecider(alice, c.err), c.name)
	}
	assert.True(t, activation.OwnPanic(grain.ID{}, callee), "no id given: any panic counts")
}
