package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Grains whose hooks Go compiles but the silo could never call.
type (
	wrongDeactivate struct{ counter }
	wrongActivate   struct{ counter }
	ptrHooks        struct{}
	ptrWrongHook    struct{}
	rightValueHooks struct{}
)

func (*wrongDeactivate) OnDeactivate(context.Context, *grain.Context, grain.DeactivationReason) error {
	return nil
}
func (*wrongActivate) OnActivate(context.Context, *grain.Context)    {}
func (*ptrHooks) OnDeactivate(context.Context, *grain.Context) error { return nil }
func (*ptrWrongHook) OnActivate(context.Context) error               { return nil }
func (ptrHooks) Receive(context.Context, *grain.Context, any) (any, error) {
	return nil, nil
}
func (ptrWrongHook) Receive(context.Context, *grain.Context, any) (any, error) {
	return nil, nil
}
func (rightValueHooks) Receive(context.Context, *grain.Context, any) (any, error) {
	return nil, nil
}
func (rightValueHooks) OnActivate(context.Context, *grain.Context) error   { return nil }
func (rightValueHooks) OnDeactivate(context.Context, *grain.Context) error { return nil }

// Register refuses a grain whose OnActivate or OnDeactivate would never
// run, saying why, instead of skipping the hook without a word; a factory
// that returns an interface has its grains checked at activation.
func TestRegisterRefusesHooksThatWouldNeverRun(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()

	err = silo.Register(s, "a", func(grain.ID) *wrongDeactivate { return &wrongDeactivate{} })
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "OnDeactivate is func(context.Context, *grain.Context, grain.DeactivationReason) error, not func(context.Context, *grain.Context) error")

	err = silo.Register(s, "b", func(grain.ID) *wrongActivate { return &wrongActivate{} })
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "OnActivate is func(context.Context, *grain.Context), not")

	err = silo.Register(s, "c", func(grain.ID) ptrHooks { return ptrHooks{} })
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "return a pointer")

	err = silo.Register(s, "d", func(grain.ID) ptrWrongHook { return ptrWrongHook{} })
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "OnActivate is func(context.Context) error")

	// What is right is taken: pointers, values with value hooks, and
	// interfaces (checked by what they hold, at activation).
	require.NoError(t, silo.Register(s, "e", func(grain.ID) *ptrHooks { return &ptrHooks{} }))
	require.NoError(t, silo.Register(s, "f", func(grain.ID) rightValueHooks { return rightValueHooks{} }))
	require.NoError(t, silo.Register(s, "g", func(grain.ID) grain.Grain { return &wrongDeactivate{} }))
	require.NoError(t, silo.Register(s, "h", func(grain.ID) *counter { return &counter{} }))
	require.NoError(t, silo.Register(s, "i", func(grain.ID) grain.Grain { return &counter{} }))

	// A factory that returns an interface is checked by what it builds, at
	// the first activation of each type: the activation fails, saying why.
	require.NoError(t, s.Start())
	ctx := ctxT(t)
	for range 2 { // the second time from the check's cache
		_, err = s.Ask(ctx, grain.NewID("g", "x"), get{})
		require.ErrorIs(t, err, grain.ErrActivation)
		require.ErrorIs(t, err, grain.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "OnDeactivate is func(context.Context, *grain.Context, grain.DeactivationReason) error")
	}
	for _, kind := range []string{"e", "f", "h", "i"} {
		_, err := s.Ask(ctx, grain.NewID(kind, "x"), get{})
		require.NoError(t, err, kind)
	}
}
