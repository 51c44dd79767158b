package grain_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// Every typed error says it comes from granary, matches its own sentinel
// and no other of the typed errors', and unwraps to its cause.
func TestTypedErrorsMatchTheirSentinels(t *testing.T) {
	id := grain.NewID("cart", "42")
	cause := errors.New("storage down")
	sentinels := []error{grain.ErrPanic, grain.ErrActivation, grain.ErrWrongReplyType, grain.ErrDeadLetter, grain.ErrCallCycle, grain.ErrTimeout}
	cases := []struct {
		err     error
		matches []error
		text    string
	}{
		{&grain.IDError{ID: grain.NewID("cart", ""), Err: grain.ErrEmptyKey}, []error{grain.ErrEmptyKey}, `granary: empty grain key: kind "cart" key ""`},
		{&grain.IDError{Err: grain.ErrInvalidID}, []error{grain.ErrInvalidID}, "granary: invalid grain id"},
		{&grain.PanicError{ID: id, Value: "boom"}, []error{grain.ErrPanic}, "granary: grain cart/42 panicked: boom"},
		{&grain.PanicError{ID: id, Value: io.EOF}, []error{grain.ErrPanic, io.EOF}, "granary: grain cart/42 panicked: EOF"},
		{&grain.ActivationError{ID: id, Err: cause}, []error{grain.ErrActivation, cause}, "granary: activating cart/42: storage down"},
		{&grain.ReplyTypeError{ID: id, Want: "int", Got: "string"}, []error{grain.ErrWrongReplyType}, "granary: reply from cart/42 is string, want int"},
		{&grain.DeadLetterError{ID: id, Reason: grain.ReasonOverload}, []error{grain.ErrDeadLetter, grain.ErrOverloaded}, "granary: message to cart/42 not delivered (overload)"},
		{&grain.DeadLetterError{ID: id, Reason: grain.ReasonActivationFailed, Err: cause}, []error{grain.ErrDeadLetter, grain.ErrActivation, cause}, "granary: message to cart/42 not delivered (activation failed): storage down"},
		{&grain.CallCycleError{Chain: []grain.ID{id, grain.NewIntID("stock", 7), id}}, []error{grain.ErrCallCycle}, "granary: call cycle: cart/42 -> stock#7 -> cart/42"},
		{&grain.TimeoutError{ID: id, Cause: context.DeadlineExceeded}, []error{grain.ErrTimeout, context.DeadlineExceeded}, "granary: call to cart/42 timed out: context deadline exceeded"},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			assert.Equal(t, c.text, c.err.Error())
			assert.True(t, strings.HasPrefix(c.err.Error(), "granary: "))
			for _, s := range c.matches {
				assert.ErrorIs(t, c.err, s)
			}
			for _, s := range sentinels {
				if !slices.Contains(c.matches, s) {
					assert.NotErrorIs(t, c.err, s)
				}
			}
		})
	}
	var te interface{ Timeout() bool }
	require.ErrorAs(t, error(&grain.TimeoutError{ID: id, Cause: context.DeadlineExceeded}), &te)
	assert.True(t, te.Timeout(), "a net.Error-style timeout")
}

// A dead letter's error matches the sentinel of its reason, where it has
// one, and every reason has a name.
func TestReasonsNameThemselvesAndTheirSentinels(t *testing.T) {
	want := map[grain.Reason]error{
		grain.ReasonStopped:          grain.ErrGrainStopped,
		grain.ReasonQuarantined:      grain.ErrGrainStopped,
		grain.ReasonActivationFailed: grain.ErrActivation,
		grain.ReasonShutdown:         grain.ErrSiloClosed,
		grain.ReasonOverload:         grain.ErrOverloaded,
		grain.ReasonDeadlock:         grain.ErrCallCycle,
		grain.ReasonObserverClosed:   grain.ErrObserverClosed,
	}
	names := map[string]bool{}
	for r := range grain.Reason(grain.NumReasons) {
		name := r.String()
		assert.NotEmpty(t, name)
		assert.False(t, names[name], "two reasons named %q", name)
		names[name] = true
		err := &grain.DeadLetterError{Reason: r}
		if s, ok := want[r]; ok {
			assert.ErrorIs(t, err, s, r.String())
		}
		assert.ErrorIs(t, err, grain.ErrDeadLetter)
	}
	assert.Equal(t, "unknown", grain.Reason(200).String())
}

// The adapters call their functions.
func TestFuncAndFilterFuncAdapters(t *testing.T) {
	g := grain.Func(func(_ context.Context, _ *grain.Context, msg any) (any, error) { return msg, nil })
	f := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		r, err := next.Receive(ctx, c, msg.(string)+"!")
		return "<" + r.(string) + ">", err
	})
	var c grain.Context
	r, err := f.Intercept(context.Background(), &c, "hi", g)
	require.NoError(t, err)
	assert.Equal(t, "<hi!>", r)
}
