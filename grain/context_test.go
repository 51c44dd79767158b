package grain_test

import (
	"testing"
	"time"

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
