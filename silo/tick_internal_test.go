package silo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

// An owner in a run of short rounds reads the clock only every
// clockRounds rounds and every clockTurns messages, and after a park; in
// between it takes the watchdog's reading, never going back. With any
// clock but the real one, it reads it every round.
func TestAnOwnerInShortRoundsReadsTheClockEveryFewRounds(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{Partitions: 1, Clock: clk})
	require.NoError(t, err)
	s.epoch = clk.Now() // as Start sets it
	s.realClk = true    // as with the real clock; this one shows when the owner reads it
	p := s.parts[0]
	p.tick(true)
	require.Zero(t, p.now)

	clk.Advance(time.Second)
	for range clockRounds - 1 {
		p.tick(false)
	}
	assert.Zero(t, p.now, "short rounds: the clock is not read")
	p.tick(false)
	assert.Equal(t, time.Second, p.now, "read at the clockRounds-th")

	clk.Advance(time.Second)
	s.dog.now.Store(int64(1500 * time.Millisecond))
	p.tick(false)
	assert.Equal(t, 1500*time.Millisecond, p.now, "the watchdog's reading")
	s.dog.now.Store(int64(time.Second))
	p.tick(false)
	assert.Equal(t, 1500*time.Millisecond, p.now, "an older reading: never back")

	p.nHandled += clockTurns
	p.tick(false)
	assert.Equal(t, 2*time.Second, p.now, "read after clockTurns messages")

	clk.Advance(time.Second)
	p.tick(true)
	assert.Equal(t, 3*time.Second, p.now, "read after a park")

	s.realClk = false
	clk.Advance(time.Second)
	p.tick(false)
	assert.Equal(t, 4*time.Second, p.now, "another clock: read every round")
}
