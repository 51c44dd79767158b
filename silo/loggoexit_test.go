package silo_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// hostile is a Logger that counts each line, then does what a hostile
// handler does: runtime.Goexit, as a test's handler that calls t.FailNow on
// a warning would, or a panic.
func hostile(lines *atomic.Int32, then func()) *slog.Logger {
	return slog.New(handlerFunc(func(slog.Record) {
		lines.Add(1)
		then()
	}))
}

// sulker fails its OnDeactivate, which the silo logs.
type sulker struct{}

func (sulker) Receive(context.Context, *grain.Context, any) (any, error) { return "here", nil }
func (sulker) OnDeactivate(context.Context, *grain.Context) error        { return errors.New("sulking") }

// A Logger whose handler calls runtime.Goexit ends only the goroutine that
// wrote the line, not what the silo was doing when it logged: the failed
// OnDeactivate's grain still leaves, and the next message activates it
// afresh.
func TestALoggerCallingGoexitDoesNotCutTheSilosWorkShort(t *testing.T) {
	var lines, built atomic.Int32
	s := newSilo(t, silo.Config{Partitions: 1, Logger: hostile(&lines, runtime.Goexit)}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "sulker", func(grain.ID) sulker { built.Add(1); return sulker{} }))
	})
	id := grain.NewID("sulker", "a")
	for i := range 4 {
		// Each ask after a Deactivate waits for the OnDeactivate, then
		// goes to a fresh activation: it is answered only if the failed
		// deactivation was carried through.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		v, err := s.Ask(ctx, id, get{})
		cancel()
		require.NoError(t, err, "round %d", i)
		require.Equal(t, "here", v)
		if i < 3 {
			require.NoError(t, s.Deactivate(t.Context(), id))
		}
	}
	require.EqualValues(t, 4, built.Load(), "a fresh activation after each deactivation")
	s.WaitLogged()
	require.EqualValues(t, 3, lines.Load(), "each failed OnDeactivate was logged")
}

// A Logger whose handler panics loses its lines, counted as dropped; the
// process and the silo's work go on.
func TestALoggerThatPanicsLosesOnlyItsLines(t *testing.T) {
	var lines atomic.Int32
	s := newSilo(t, silo.Config{Partitions: 1, Logger: hostile(&lines, func() { panic("handler boom") })}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "sulker", func(grain.ID) sulker { return sulker{} }))
	})
	id := grain.NewID("sulker", "a")
	for i := range 3 {
		v, err := s.Ask(t.Context(), id, get{})
		require.NoError(t, err, "round %d", i)
		require.Equal(t, "here", v)
		require.NoError(t, s.Deactivate(t.Context(), id)) // OnDeactivate fails: a line
	}
	_, err := s.Ask(t.Context(), id, get{}) // after the third deactivation's line
	require.NoError(t, err)
	s.WaitLogged()
	require.Equal(t, int32(3), lines.Load())
	require.Equal(t, uint64(3), s.Stats().DroppedLogLines)
}
