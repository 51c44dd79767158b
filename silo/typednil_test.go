package silo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// misreturner counts its messages and, on "typed nil", returns its count with a
// nil *grain.TimeoutError as the error: Go's classic mistake, a typed nil
// in a non-nil error. *grain.TimeoutError's Unwrap reads its receiver, so
// matching that error with errors.Is or errors.As panics.
type misreturner struct{ n int }

func (g *misreturner) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	g.n++
	switch msg {
	case "typed nil":
		var err *grain.TimeoutError
		return g.n, err
	case "panicky":
		return g.n, panicky{}
	}
	return g.n, nil
}

// panicky is an error whose Unwrap panics: a program's error type with a
// bug in it.
type panicky struct{}

func (panicky) Error() string { return "panicky" }
func (panicky) Unwrap() error { panic("panicky: Unwrap") }

// A handler that returns a typed nil as its error fails its turn with an
// error matching grain.ErrTypedNil that names the type — for its caller, and
// under a filter that wraps it — and the grain resumes, its state whole.
// (Before, the default Decider's errors.As called the nil receiver's Unwrap
// on the partition's goroutine: the process crashed.)
func TestATypedNilReturnedAsAnErrorFailsTheTurnClearly(t *testing.T) {
	for _, filtered := range []bool{false, true} {
		t.Run(fmt.Sprintf("filtered=%v", filtered), func(t *testing.T) {
			var opts []silo.KindOption
			if filtered {
				opts = append(opts, silo.WithFilters(grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
					v, err := next.Receive(ctx, c, msg)
					if err != nil {
						return v, fmt.Errorf("audited: %w", err)
					}
					return v, nil
				})))
			}
			s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "tally", func(grain.ID) *misreturner { return &misreturner{} }, opts...))
			})
			ctx := ctxT(t)
			id := grain.NewID("tally", "a")

			_, err := s.Ask(ctx, id, "typed nil")
			require.ErrorIs(t, err, grain.ErrTypedNil)
			assert.NotErrorIs(t, err, grain.ErrTimeout, "the typed nil itself goes no further")
			assert.Contains(t, err.Error(), "tally/a returned a nil *grain.TimeoutError")

			require.NoError(t, s.Tell(ctx, id, "typed nil"))
			n, err := silo.Call[int](ctx, s, id, "count")
			require.NoError(t, err)
			assert.Equal(t, 3, n, "the grain resumed: its count is whole")
			st := s.Stats()
			assert.EqualValues(t, 1, st.FailedTells)
			assert.Zero(t, st.Restarts)
		})
	}
}

// An error whose own methods panic when matched — a program's bug in its
// error type — is passed to the caller as it is, and the silo that decided
// what to do about it, and logged it, goes on.
func TestAnErrorWhoseUnwrapPanicsTakesNothingDown(t *testing.T) {
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "tally", func(grain.ID) *misreturner { return &misreturner{} }))
	})
	ctx := ctxT(t)
	id := grain.NewID("tally", "a")

	_, err := s.Ask(ctx, id, "panicky")
	assert.Equal(t, panicky{}, err)
	require.NoError(t, s.Tell(ctx, id, "panicky"))
	n, err := silo.Call[int](ctx, s, id, "count")
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the grain resumed")
	assert.EqualValues(t, 1, s.Stats().FailedTells)
}

type typedNilHooks struct {
	misreturner
	onActivate bool
}

func (g *typedNilHooks) OnActivate(context.Context, *grain.Context) error {
	if g.onActivate {
		var err *grain.DeadLetterError
		return err
	}
	return nil
}

func (g *typedNilHooks) OnDeactivate(context.Context, *grain.Context) error {
	var err *grain.CallCycleError
	return err
}

// OnActivate's typed nil fails the activation with it named; OnDeactivate's
// is logged, as any error of it is, and the grain goes.
func TestATypedNilFromAHookIsNamed(t *testing.T) {
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hooks", func(id grain.ID) *typedNilHooks {
			return &typedNilHooks{onActivate: id.Key() == "bad"}
		}))
	})
	ctx := ctxT(t)
	_, err := s.Ask(ctx, grain.NewID("hooks", "bad"), "count")
	require.ErrorIs(t, err, grain.ErrActivation)
	require.ErrorIs(t, err, grain.ErrTypedNil)
	assert.Contains(t, err.Error(), "a nil *grain.DeadLetterError")

	good := grain.NewID("hooks", "good")
	_, err = s.Ask(ctx, good, "count")
	require.NoError(t, err)
	require.NoError(t, s.Deactivate(ctx, good))
	n, err := silo.Call[int](ctx, s, good, "count")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a fresh activation: the old one deactivated, its hook's typed nil logged")
}
