package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// descend calls the grain of the next key down with n-1, until n is 0,
// and answers how deep it went. With self, it calls itself (a reentrant
// recursion); else key n-1.
func descend(self bool) func(grain.ID) grain.Func {
	return func(id grain.ID) grain.Func {
		return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
			n := msg.(int)
			if n == 0 {
				return 0, nil
			}
			next := grain.NewIntID(id.Kind(), int64(n-1))
			if self {
				next = c.ID()
			}
			v, err := silo.Call[int](ctx, c.Silo(), next, n-1)
			return v + 1, err
		}
	}
}

// A runaway recursion through grains fails at Config.MaxCallDepth with
// ErrCallTooDeep, at once, instead of growing its chains — whose copies
// grow with the square of the depth — until memory runs out (10,000 deep
// took 2.7 GB and 9 s; 50,000 deep, 5.5 GB before its 20 s call timeout).
func TestRunawayRecursionFailsAtTheDepthLimit(t *testing.T) {
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "rec", descend(true), silo.WithReentrant()))
	})
	_, err := silo.Call[int](ctxT(t), s, grain.NewID("rec", "r"), 1_000_000)
	require.ErrorIs(t, err, grain.ErrCallTooDeep)
	require.ErrorIs(t, err, silo.ErrCallTooDeep)
	assert.Contains(t, err.Error(), "65 grains wait")

	v, err := silo.Call[int](ctxT(t), s, grain.NewID("rec", "r"), silo.DefaultMaxCallDepth)
	require.NoError(t, err, "64 grains waiting is allowed")
	assert.Equal(t, silo.DefaultMaxCallDepth, v)
}

// The limit counts the grains waiting in one chain, of any kinds; a
// negative MaxCallDepth sets none.
func TestMaxCallDepth(t *testing.T) {
	s := newSilo(t, silo.Config{MaxCallDepth: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "down", descend(false)))
	})
	v, err := silo.Call[int](ctxT(t), s, grain.NewIntID("down", 2), 2) // 2 -> 1 -> 0: two wait
	require.NoError(t, err)
	assert.Equal(t, 2, v)
	_, err = silo.Call[int](ctxT(t), s, grain.NewIntID("down", 3), 3) // a third would wait
	require.ErrorIs(t, err, grain.ErrCallTooDeep)

	s = newSilo(t, silo.Config{MaxCallDepth: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "down", descend(false)))
	})
	v, err = silo.Call[int](ctxT(t), s, grain.NewIntID("down", 200), 200)
	require.NoError(t, err)
	assert.Equal(t, 200, v)
}
