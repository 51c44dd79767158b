package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// ledger keeps a balance, and on "audit" asks an auditor, returning its
// error as its own.
type ledger struct{ balance int }

func (a *ledger) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch msg {
	case "deposit":
		a.balance += 100
	case "audit":
		_, err := c.Silo().Ask(ctx, grain.NewID("auditor", "x"), "check")
		return a.balance, err
	}
	return a.balance, nil
}

// A grain that returns the error of a call whose grain panicked is not
// restarted by the default supervision: the panic was the callee's, and
// the caller's state is whole. (Before, the ledger was rebuilt too —
// its balance gone for the auditor's bug — and so was every grain up the
// call chain that passed the error on.)
func TestAGrainReturningACalleesPanicKeepsItsState(t *testing.T) {
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "account", func(grain.ID) *ledger { return &ledger{} }))
		require.NoError(t, silo.Register(s, "auditor", func(grain.ID) grain.Func {
			return func(context.Context, *grain.Context, any) (any, error) { panic("auditor bug") }
		}))
	})
	ctx := ctxT(t)
	alice := grain.NewID("account", "alice")
	_, err := s.Ask(ctx, alice, "deposit")
	require.NoError(t, err)
	_, err = s.Ask(ctx, alice, "audit")
	var pe *grain.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, grain.NewID("auditor", "x"), pe.ID, "the caller hears whose panic it was")
	v, err := s.Ask(ctx, alice, "balance")
	require.NoError(t, err)
	assert.Equal(t, 100, v, "the ledger kept its balance")
	assert.EqualValues(t, 1, s.Stats().Restarts, "the auditor restarted; the ledger did not")
}
