package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// ActiveGrains lists what is active, by kind or all, across partitions; a
// grain gone is gone from it.
func TestActiveGrainsListsWhatIsActive(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 4}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
		require.NoError(t, silo.Register(s, "other", func(grain.ID) *counter { return &counter{} }))
	})
	ctx := ctxT(t)
	none, err := s.ActiveGrains(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, none)

	var counters []grain.ID
	for i := range 50 {
		id := grain.NewIntID("counter", int64(i))
		counters = append(counters, id)
		_, err := s.Ask(ctx, id, incr{1})
		require.NoError(t, err)
	}
	other := grain.NewID("other", "o")
	_, err = s.Ask(ctx, other, incr{1})
	require.NoError(t, err)

	got, err := s.ActiveGrains(ctx, "counter")
	require.NoError(t, err)
	assert.ElementsMatch(t, counters, got)
	got, err = s.ActiveGrains(ctx, "")
	require.NoError(t, err)
	assert.ElementsMatch(t, append(counters, other), got)

	// A grain deactivating is still listed until it is gone.
	require.NoError(t, s.Deactivate(ctx, other))
	require.Eventually(t, func() bool {
		got, err := s.ActiveGrains(ctx, "other")
		return err == nil && len(got) == 0
	}, 10*time.Second, time.Millisecond)
	got, err = s.ActiveGrains(ctx, "counter")
	require.NoError(t, err)
	assert.Len(t, got, 50)
}

func TestActiveGrainsRefusesWhatItCannotAnswer(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
	ctx := ctxT(t)
	_, err = s.ActiveGrains(ctx, "counter")
	require.ErrorIs(t, err, silo.ErrSiloClosed, "not started")
	require.ErrorIs(t, err, silo.ErrNotStarted)
	require.NoError(t, s.Start())
	_, err = s.ActiveGrains(ctx, "nope")
	require.ErrorIs(t, err, grain.ErrUnknownKind)
	//lint:ignore SA1012 a nil ctx is the bad input under test
	_, err = s.ActiveGrains(nil, "counter") //nolint:staticcheck
	require.ErrorIs(t, err, grain.ErrNilContext)

	ended, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.ActiveGrains(ended, "counter")
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, s.Close())
	_, err = s.ActiveGrains(ctx, "counter")
	require.ErrorIs(t, err, silo.ErrSiloClosed)
	var zero *silo.Silo
	_, err = zero.ActiveGrains(ctx, "")
	require.Error(t, err)
}

// lister lists its silo's grains from its turn.
type lister struct{ s *silo.Silo }

func (l *lister) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	ids, err := l.s.ActiveGrains(ctx, "lister")
	return len(ids), err
}

// From a turn, ActiveGrains hands the turn's partition off at once, as a
// call does: with a watchdog that would wait an hour, the partition's own
// answer still comes.
func TestActiveGrainsFromATurn(t *testing.T) {
	var s *silo.Silo
	s = newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour}, func(s2 *silo.Silo) {
		require.NoError(t, silo.Register(s2, "lister", func(grain.ID) *lister { return &lister{s: s} }))
	})
	ctx := ctxT(t)
	n, err := silo.Call[int](ctx, s, grain.NewID("lister", "a"), "list")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}
