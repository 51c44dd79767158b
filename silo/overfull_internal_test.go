package silo

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// A sender learns its target is overloaded only if it is: another grain of
// the same slot (a few bits of the hash) is looked up in the set, not
// refused, and the slots empty again as grains drain.
func TestOverfullSlotsAnswerOnlyForTheFullGrain(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	p := s.parts[0]
	full := grain.NewID("k", "full")
	var twin grain.ID // another identity in full's slot
	for i := 0; ; i++ {
		twin = grain.NewID("k", fmt.Sprint("twin-", i))
		if ovSlot(twin.Hash()) == ovSlot(full.Hash()) {
			break
		}
	}
	var other grain.ID // one in another slot
	for i := 0; ; i++ {
		other = grain.NewID("k", fmt.Sprint("other-", i))
		if ovSlot(other.Hash()) != ovSlot(full.Hash()) {
			break
		}
	}
	check := func(wantFull bool) {
		t.Helper()
		assert.Equal(t, wantFull, p.overfull(full, full.Hash()))
		assert.False(t, p.overfull(twin, twin.Hash()), "same slot, not full")
		assert.False(t, p.overfull(other, other.Hash()))
	}
	check(false)
	a := &act{}
	a.ID = full
	p.setOverfull(a, true)
	p.setOverfull(a, true) // marked already: counted once
	check(true)
	p.setOverfull(a, false)
	check(false)
	assert.Zero(t, p.ovSlots.Load()[ovSlot(full.Hash())].Load(), "the slot is empty again")
}
