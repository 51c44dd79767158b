package grain_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

func TestContextSetPointsAtTheNewTurn(t *testing.T) {
	a, b := grain.NewID("player", "a"), grain.NewID("player", "b")
	c := grain.ContextFor(&a, &b, nil, nil)
	require.Equal(t, a, c.ID())
	sender, ok := c.Sender()
	require.True(t, ok)
	require.Equal(t, b, sender)

	c.Set(&b, nil, nil, nil) // the next turn: a message from outside any grain
	require.Equal(t, b, c.ID())
	_, ok = c.Sender()
	require.False(t, ok)
}

// A grain under test may get a zero Context, or one without a runtime:
// every method is safe, and the one that needs a runtime says so.
func TestContextWithoutARuntime(t *testing.T) {
	id := grain.NewID("player", "a")
	for name, c := range map[string]*grain.Context{
		"zero":          {},
		"nil":           nil,
		"no Self":       func() *grain.Context { c := grain.NewContext(id, grain.ID{}, nil, nil); return &c }(),
		"no Self or ID": func() *grain.Context { c := grain.NewContext(grain.ID{}, grain.ID{}, nil, nil); return &c }(),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "no Self" {
				require.Equal(t, id, c.ID())
			} else {
				require.True(t, c.ID().IsZero())
			}
			_, ok := c.Sender()
			require.False(t, ok)
			require.Nil(t, c.Silo())
			require.False(t, c.Now().IsZero())
			c.DeactivateOnIdle()
			c.DelayDeactivation(time.Minute)
			c.StopTimer("autosave")
			require.ErrorIs(t, c.StartTimer("autosave", time.Second, 0, "tick"), grain.ErrSiloClosed)
		})
	}
}

// A checked Context answers during its turn and panics, naming the grain
// and the method, once the runtime has ended the turn — every method.
func TestACheckedContextPanicsOnceItsTurnHasEnded(t *testing.T) {
	id := grain.NewID("player", "alice")
	c := grain.NewContext(id, grain.NewID("lobby", "eu"), nil, nil)
	var over atomic.Bool
	c.Check(&over)
	require.Equal(t, id, c.ID(), "during its turn it answers")
	from, ok := c.Sender()
	require.True(t, ok)
	require.Equal(t, grain.NewID("lobby", "eu"), from)

	over.Store(true)
	for method, call := range map[string]func(){
		"ID":                 func() { c.ID() },
		"Sender":             func() { c.Sender() },
		"DeactivateOnIdle":   func() { c.DeactivateOnIdle() },
		"DelayDeactivation":  func() { c.DelayDeactivation(time.Second) },
		"StartTimer":         func() { _ = c.StartTimer("t", time.Second, 0, "tick") },
		"StopTimer":          func() { c.StopTimer("t") },
		"DeactivationReason": func() { c.DeactivationReason() },
	} {
		v := recoverFrom(call)
		err, isErr := v.(error)
		require.True(t, isErr, "%s after the turn: panicked with %v", method, v)
		var after *grain.ContextAfterTurnError
		require.ErrorAs(t, err, &after, method)
		assert.Equal(t, id, after.ID)
		assert.Equal(t, method, after.Method)
		assert.ErrorIs(t, err, grain.ErrContextAfterTurn)
		assert.Contains(t, err.Error(), "player/alice")
	}
	assert.Nil(t, recoverFrom(func() { c.Silo(); c.Now() }), "the same for every turn: they still answer")
}

// An unchecked Context — NewContext's, ContextFor's, a silo's by default —
// never looks.
func TestAnUncheckedContextDoesNotLook(t *testing.T) {
	c := grain.NewContext(grain.NewID("player", "bob"), grain.ID{}, nil, nil)
	assert.Nil(t, recoverFrom(func() { c.ID() }))
	var zero grain.Context
	assert.Nil(t, recoverFrom(func() { zero.ID(); zero.Now(); zero.StopTimer("x") }))
}

func recoverFrom(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}
