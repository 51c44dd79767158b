package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

type traceKey struct{}

// An ask's handler sees its caller's ctx values, along a chain of calls
// too; a tell's handler sees none of its sender's (Silo.Tell's doc says
// why), so what it needs travels in the message.
func TestAskCarriesTheCallersValuesAndTellDoesNot(t *testing.T) {
	told := make(chan string, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "traced", func(grain.ID) grain.Func {
			return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
				v, _ := ctx.Value(traceKey{}).(string)
				switch msg {
				case "hop": // a nested call, with the turn's ctx
					next, err := silo.Call[string](ctx, gc.Silo(), grain.NewID("traced", "b"), "read")
					return v + ">" + next, err
				case "tell":
					told <- v
				}
				return v, nil
			}
		}))
	})
	ctx := context.WithValue(ctxT(t), traceKey{}, "trace-7")

	v, err := silo.Call[string](ctx, s, grain.NewID("traced", "a"), "read")
	require.NoError(t, err)
	require.Equal(t, "trace-7", v)
	v, err = silo.Call[string](ctx, s, grain.NewID("traced", "a"), "hop")
	require.NoError(t, err)
	require.Equal(t, "trace-7>trace-7", v)

	require.NoError(t, s.Tell(ctx, grain.NewID("traced", "a"), "tell"))
	require.Equal(t, "", <-told)
}
