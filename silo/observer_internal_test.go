package silo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// A tell to an observer whose checks found the silo running, carried on
// after the silo stopped, is refused with ErrSiloClosed — it was refused
// with the observers' kind's answer to an ask ("they take tells only"), an
// ErrUnknownKind, when a Tell raced with Close (found by a probe telling
// observers from eight goroutines while the silo closed).
func TestATellToAnObserverRacingCloseIsSiloClosed(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	o, err := s.NewObserver(1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	err = s.tellObserver(context.Background(), o.ID(), "late", errObserverTarget) // as Tell calls it after its checks
	require.ErrorIs(t, err, grain.ErrSiloClosed)
	require.NotErrorIs(t, err, grain.ErrUnknownKind)
}
