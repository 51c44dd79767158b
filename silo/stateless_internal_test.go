package silo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// The deadlock graph keys its edges by identity, which a stateless
// worker's activations share. Were their waits in it, this would read as a
// cycle: one activation of w waits on a, and a waits on w — on another of
// w's activations, which waits on nothing and will answer. Such waits are
// not recorded (Ask asks kind.inWaitGraph), and a walk that meets such a
// grain gives no verdict.
func TestStatelessWorkersAreNotInTheDeadlockGraph(t *testing.T) {
	s, err := New(Config{Partitions: 2})
	require.NoError(t, err)
	defer s.Close()
	nop := func(grain.ID) *nopGrain { return &nopGrain{} }
	require.NoError(t, Register(s, "w", nop, WithStatelessWorker(2)))
	require.NoError(t, Register(s, "a", nop))
	assert.False(t, s.kinds["w"].inWaitGraph())
	assert.True(t, s.kinds["a"].inWaitGraph())

	ctx := t.Context()
	w, a := grain.NewID("w", "x"), grain.NewID("a", "y")
	fromW := queues.NewRequest(ctx, nil) // an activation of w calling a
	fromA := queues.NewRequest(ctx, nil) // a calling w
	s.waitsOf(w.Hash()).start(w, w.Hash(), fromW, a, a.Hash(), false)
	s.waitsOf(a.Hash()).start(a, a.Hash(), fromA, w, w.Hash(), false)
	// w's ask, queued behind a, whose turn waits on w.
	env := queues.Envelope{Target: a, Hash: a.Hash(), Request: fromW, Meta: &queues.Meta{Sender: w}}
	assert.Nil(t, s.closesCycle(&env))
}
