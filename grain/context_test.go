package grain_test

import (
	"testing"

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
