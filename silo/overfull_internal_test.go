package silo

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
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

// A held grain's door lets in its budget of senders and holds the next,
// who learns of more room by its channel; the owner learns a sender
// waited. Refusing wins over holding, and an open door lets all in.
func TestAHeldDoorLetsInItsBudget(t *testing.T) {
	p, a := doorPartition(t)
	id, h := a.ID, a.ID.Hash()
	assert.False(t, p.setDoor(a, doorWait, true, 2), "no sender waited yet")
	for range 2 {
		d, _ := p.doorOf(id, h)
		assert.Zero(t, d, "within the budget: let in")
	}
	d, room := p.doorOf(id, h)
	require.Equal(t, doorWait, d)
	require.NotNil(t, room)
	select {
	case <-room:
		t.Fatal("no room yet")
	default:
	}
	assert.True(t, p.setDoor(a, doorWait, true, 0), "a sender waits")
	assert.True(t, p.setDoor(a, doorWait, true, 1), "it waited until now")
	<-room // woken by the room
	assert.False(t, p.setDoor(a, doorWait, true, 1), "woken, it has not come back")
	d, _ = p.doorOf(id, h)
	assert.Zero(t, d)
	p.setOverfull(a, true)
	assert.True(t, p.overfull(id, h), "refused, though held too")
	p.setOverfull(a, false)
	p.setDoor(a, doorWait, false, 0)
	d, _ = p.doorOf(id, h)
	assert.Zero(t, d)
	assert.Zero(t, p.ovN.Load(), "no door shut")
	assert.Zero(t, p.ovSlots.Load()[ovSlot(h)].Load())
}

// The senders a held door holds are let in in the order they came, each
// by its own channel, and one that gives up leaves the line; once the door
// opens, the whole line goes in.
func TestAHeldDoorLetsItsLineInInOrder(t *testing.T) {
	p, a := doorPartition(t)
	id, h := a.ID, a.ID.Hash()
	p.setDoor(a, doorWait, true, 0)
	var line []chan struct{}
	for range 4 {
		d, ch := p.doorOf(id, h)
		require.Equal(t, doorWait, d)
		line = append(line, ch)
	}
	in := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	assert.False(t, p.leaveDoor(id, line[1]), "the second gives up, not let in")
	p.setDoor(a, doorWait, true, 2)
	assert.True(t, in(line[0]))
	assert.True(t, in(line[2]), "the second left: the third is next")
	assert.False(t, in(line[3]))
	d, ch := p.doorOf(id, h)
	require.Equal(t, doorWait, d, "the budget went to the line: it waits too")
	assert.True(t, p.leaveDoor(id, line[0]), "let in already")
	p.setDoor(a, doorWait, false, 0)
	assert.True(t, in(line[3]))
	assert.True(t, in(ch))
	assert.Zero(t, p.ovN.Load())
}

// doorPartition returns the partition of a silo of one, not started, and a
// grain's record for its doors.
func doorPartition(t *testing.T) (*partition, *act) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	a := &act{}
	a.ID = grain.NewID("k", "held")
	return s.parts[0], a
}

// A hold whose grain was sent a message while a turn of it ran off the
// partition (its backlog counted from the hold's base) lets its senders in
// when it ends: the senders waiting at its door are let in, and the next
// finds it open. Marked off there but left shut, the door outlived its
// hold — dropped as the grain was served again with room — and every
// sender of the grain waited at it until its ctx ended, the partition's
// owner parked with nothing to do (a stateless worker's senders, in
// TestStatelessWorkerCountsComeBackToZero, 2 runs in 300).
func TestAHoldThatWentOffWhileSentToOpensItsDoorWhenItEnds(t *testing.T) {
	p, w := ownedPartition(t, t.Context(), Config{}, WithMaxBacklog(4, RejectNewest))
	id := grain.NewID("k", "held")
	env := queues.Envelope{Target: id, Hash: id.Hash(), Msg: &struct{}{}}
	require.True(t, p.deliver(w, &env)) // activates it, and runs the message
	a, ok := p.dir.Get(id, id.Hash())
	require.True(t, ok)

	p.hold(a, 4) // its backlog filled while it was served
	d, waiting := p.doorOf(id, id.Hash())
	require.Equal(t, doorWait, d, "a sender waits at its door")
	// A turn of it runs off the partition, past the grace of its wait:
	// its grace spent (waitGrace).
	a.Turns++
	p.grace.list = append(p.grace.list, holdGrace{a: a})
	p.backlogFull(a, &env)
	a.Turns-- // back, served, its backlog empty
	p.holding()

	select {
	case <-waiting:
	default:
		t.Fatal("the sender that waited is still at the door")
	}
	d, _ = p.doorOf(id, id.Hash())
	assert.Zero(t, d, "the next sender finds the door open")
	assert.Empty(t, p.holders, "the hold is over")
	assert.Zero(t, p.ovN.Load(), "no door shut in the partition")
}

// The slots a sender reads spread a partition's grains over all of them:
// the partition's own choice of grain is made by the hash's top bits, so a
// slot chosen by those gave a partition of four only a quarter of the
// slots, and its sends four times the chance to take the lock.
func TestOverfullSlotsSpreadAPartitionsGrains(t *testing.T) {
	s, err := New(Config{Partitions: 4})
	require.NoError(t, err)
	used := map[uint64]bool{}
	for k := range 20_000 {
		id := grain.NewIntID("k", int64(k))
		if s.locator.LocateHash(id.Hash()).Partition == 0 {
			used[ovSlot(id.Hash())] = true
		}
	}
	assert.Len(t, used, len(ovSlots{}))
}

// A send refused at a full grain's door once its silo has stopped — it
// passed the silo's state before a Close, and came to the door after —
// fails with ErrSiloClosed, and its ask is answered so: no dead letter,
// since the silo's dead letters ended with it (a subscriber's channel is
// closed), and ErrOverloaded says there is one. The several-clients model
// test (TestSeveralClientsAtOnceKeepEveryPromise) found such a send told
// ErrOverloaded with no dead letter to show for it, twice in 70,000
// sequences.
func TestARefusalAtADoorAfterTheSiloStoppedIsErrSiloClosed(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	dl := s.SubscribeDeadLetters(4)
	require.NoError(t, s.Close())
	_, open := <-dl.C
	require.False(t, open, "the subscription ends with the silo")

	p := s.parts[0]
	a := &act{}
	a.ID = grain.NewID("k", "full")
	p.setOverfull(a, true) // its door refuses
	tell := queues.Envelope{Target: a.ID, Hash: a.ID.Hash(), Msg: 1}
	err = s.atDoor(t.Context(), p, &tell, nil)
	assert.ErrorIs(t, err, grain.ErrSiloClosed)
	assert.NotErrorIs(t, err, grain.ErrOverloaded)

	ask := queues.Envelope{Target: a.ID, Hash: a.ID.Hash(), Msg: 2, Request: &queues.Request{}}
	ask.Request.InitWith(t.Context(), nil, nil)
	assert.ErrorIs(t, s.atDoor(t.Context(), p, &ask, nil), grain.ErrSiloClosed)
	r, ok := ask.Request.Take()
	require.True(t, ok, "the ask is answered, not left waiting")
	assert.ErrorIs(t, r.Err, grain.ErrSiloClosed)
	assert.Zero(t, s.Stats().DeadLetters[grain.ReasonOverload])
}
