package silo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The grains a settling partition counts are bounded, and one that keeps
// it busy is never lost among those that came first and finished: a grain
// new to a full table takes the place of the one with the fewest rounds,
// and its count.
func TestWhatKeptAPartitionBusyKeepsTheGrainThatNeverStopped(t *testing.T) {
	var p partition
	ran := func(a *act, rounds int) {
		for range rounds {
			p.lastRan = a
			p.noteKeptBusy()
		}
	}
	p.lastRan = nil
	p.noteKeptBusy()
	require.Empty(t, p.keptBusy, "a round that ran nothing names no grain")

	finished := make([]*act, 20) // a burst of work under way, each grain's done in a few rounds
	before := 0
	for i := range finished {
		finished[i] = &act{}
		ran(finished[i], 1+i%3)
		before += 1 + i%3
	}
	require.Len(t, p.keptBusy, keptBusyMax)
	looper := &act{}
	ran(looper, 100) // one that tells itself: last in every round from now on
	ran(finished[19], 1)

	rounds := map[*act]int{}
	for _, k := range p.keptBusy {
		rounds[k.a] = k.rounds
	}
	require.Len(t, p.keptBusy, keptBusyMax, "never more than its bound")
	require.Contains(t, rounds, looper)
	// Space-Saving's count is over by at most the count it took over,
	// which is at most the rounds before it over the table's size.
	assert.GreaterOrEqual(t, rounds[looper], 100)
	assert.LessOrEqual(t, rounds[looper], 100+before/keptBusyMax)
}
