package activation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
)

type mapError map[string]string

func (mapError) Error() string { return "map error" }

type funcError func() string

func (f funcError) Error() string { return f() }

func TestCheckErrorNamesATypedNil(t *testing.T) {
	id := grain.NewID("player", "p1")
	plain := errors.New("plain")
	assert.NoError(t, activation.CheckError(id, nil))
	assert.Same(t, plain, activation.CheckError(id, plain), "an error passes as it is")
	live := &grain.TimeoutError{ID: id}
	assert.Same(t, live, activation.CheckError(id, live), "a non-nil pointer is an error like any")
	assert.Equal(t, mapError{}, activation.CheckError(id, mapError{}), "an empty map is no nil")

	for _, typedNil := range []error{(*grain.TimeoutError)(nil), mapError(nil), funcError(nil)} {
		err := activation.CheckError(id, typedNil)
		require.ErrorIs(t, err, grain.ErrTypedNil, "%T", typedNil)
		assert.Contains(t, err.Error(), "player/p1 returned a nil ")
	}
	assert.Contains(t, activation.CheckError(id, (*grain.TimeoutError)(nil)).Error(), "*grain.TimeoutError")
}

func TestRunAndTheHooksCheckTheirErrors(t *testing.T) {
	id := grain.NewID("player", "p1")
	c := grain.NewContext(id, grain.ID{}, nil, nil)
	g := grain.Func(func(context.Context, *grain.Context, any) (any, error) {
		var err *grain.PanicError
		return "reply", err
	})
	_, err := activation.Run(t.Context(), g, &c, "msg")
	require.ErrorIs(t, err, grain.ErrTypedNil)
	assert.False(t, activation.OwnPanic(id, err), "a nil *grain.PanicError is no panic")

	h := &nilHooks{}
	require.ErrorIs(t, activation.Activate(t.Context(), h, &c), grain.ErrTypedNil)
	require.ErrorIs(t, activation.Deactivate(t.Context(), h, &c), grain.ErrTypedNil)
}

type nilHooks struct{ grain.Func }

func (*nilHooks) OnActivate(context.Context, *grain.Context) error {
	var err *grain.IDError
	return err
}

func (*nilHooks) OnDeactivate(context.Context, *grain.Context) error {
	var err *grain.ActivationError
	return err
}

// unwrapPanics is a program's error type with a bug: its Unwrap panics.
type unwrapPanics struct{}

func (unwrapPanics) Error() string { return "unwrap panics" }
func (unwrapPanics) Unwrap() error { panic("bug") }

func TestTheDefaultDeciderSurvivesAnErrorWhoseUnwrapPanics(t *testing.T) {
	id := grain.NewID("player", "p1")
	assert.False(t, activation.OwnPanic(id, unwrapPanics{}))
	assert.Equal(t, activation.Resume, activation.DefaultDecider(id, unwrapPanics{}))
}
