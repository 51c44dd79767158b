package queues_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/queues"
)

// DrainAppend takes what was queued since a Drain onto the end of the batch
// still being read, across segments, in order: Taken goes on counting and
// the Seq stays the Drain's.
func TestDrainAppendContinuesTheBatch(t *testing.T) {
	q := queues.New[int, string](0)
	for i := range 300 { // two segments
		require.NoError(t, q.Push(i))
	}
	b, _ := q.Drain(nil)
	for range 10 {
		b.Next()
	}
	for i := range 300 {
		require.NoError(t, q.Push(300+i))
	}
	q.PushControl("tick")
	require.True(t, q.DrainAppend(&b))
	assert.Equal(t, 1, q.Len(), "the control item left queued")
	assert.Equal(t, uint64(1), b.Seq())
	assert.Equal(t, 590, b.Len())
	for i := 10; i < 600; i++ {
		v, ok := b.Pop()
		require.True(t, ok)
		require.Equal(t, i, v)
		require.Equal(t, i+1, b.Taken())
	}
	assert.True(t, b.Empty())

	// Nothing queued: nothing to take, and true. On a finished batch it
	// starts the batch again.
	_, ctl := q.Drain(nil)
	assert.Equal(t, []string{"tick"}, ctl, "the next Drain takes the control item")
	b = queues.Batch[int, string]{}
	assert.True(t, q.DrainAppend(&b))
	assert.True(t, b.Empty())
	require.NoError(t, q.Push(-1))
	require.True(t, q.DrainAppend(&b))
	assert.Equal(t, []int{-1}, drain(&b))
	b, _ = q.Drain(nil)
	assert.Equal(t, uint64(3), b.Seq(), "a Drain after appends numbers on")
}

// An item PushControlAt placed counts the messages of the Drain that takes
// it: DrainAppend takes nothing while one waits, and the next Drain takes
// it with the messages it counted.
func TestDrainAppendTakesNothingWhileAPlacedItemWaits(t *testing.T) {
	q := queues.New[int, int](0)
	require.NoError(t, q.Push(0))
	b, _ := q.Drain(nil)
	require.NoError(t, q.Push(1))
	q.PushControlAt(func(ahead int) int { return ahead })
	require.NoError(t, q.Push(2))
	assert.False(t, q.DrainAppend(&b))
	assert.Equal(t, []int{0}, drain(&b), "the batch as it was")
	b, ctl := q.Drain(nil)
	assert.Equal(t, []int{1}, ctl, "one message ahead of it, the first of this Drain")
	assert.Equal(t, []int{1, 2}, drain(&b))
	// Taken with that Drain, it no longer holds the next appends back.
	require.NoError(t, q.Push(3))
	assert.True(t, q.DrainAppend(&b))
	assert.Equal(t, []int{3}, drain(&b))
}

// Room an append frees goes to the senders waiting for it, as a Drain's.
func TestDrainAppendFreesRoomForWaitingSenders(t *testing.T) {
	q := queues.New[int, int](2)
	require.NoError(t, q.Push(0))
	b, _ := q.Drain(nil)
	require.NoError(t, q.Push(1))
	require.NoError(t, q.Push(2))
	v := 3
	space, _, err := q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	require.True(t, q.DrainAppend(&b))
	select {
	case <-space:
	default:
		t.Fatal("the append freed room but the sender was not woken")
	}
	_, _, err = q.PushOrWait(&v, space)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, drain(&b))
	b, _ = q.Drain(nil)
	assert.Equal(t, []int{3}, drain(&b))
}

// Ahead shows the coming messages in order, across segments, from any
// place, taking none; a change made through it is what Next then reads.
func TestBatchAheadLooksWithoutTaking(t *testing.T) {
	q := queues.New[int, int](0)
	for i := range 600 {
		require.NoError(t, q.Push(i))
	}
	b, _ := q.Drain(nil)
	for range 250 {
		b.Next()
	}
	var seen []int
	b.Ahead(0, 10, func(v *int) bool { seen = append(seen, *v); return true })
	assert.Equal(t, []int{250, 251, 252, 253, 254, 255, 256, 257, 258, 259}, seen, "across the segments' edge")
	seen = seen[:0]
	b.Ahead(340, 100, func(v *int) bool { seen = append(seen, *v); return true })
	assert.Equal(t, []int{590, 591, 592, 593, 594, 595, 596, 597, 598, 599}, seen, "from a later place, to the batch's end")
	seen = seen[:0]
	b.Ahead(0, 100, func(v *int) bool { seen = append(seen, *v); return len(seen) < 3 })
	assert.Equal(t, []int{250, 251, 252}, seen, "until f says stop")
	b.Ahead(400, 5, func(*int) bool { t.Fatal("past the end"); return false })
	b.Ahead(1, 1, func(v *int) bool { *v = -1; return true })
	assert.Equal(t, 350, b.Len(), "nothing taken")
	assert.Equal(t, 250, *b.Next())
	assert.Equal(t, -1, *b.Next(), "changed in place")
	var zero queues.Batch[int, int]
	zero.Ahead(0, 5, func(*int) bool { t.Fatal("an empty batch"); return false })
}

// A consumer appends while its batch is long — the silo's owner, at each
// turn that sent a message, through a backlog. An append costs the same
// however long the batch: a few messages go into the room the batch's last
// segment has left, so a push and an append in a loop allocate nothing
// and keep the order; more than fit link their segment after the last.
func TestDrainAppendOntoALongBatch(t *testing.T) {
	q := queues.New[int, int](0)
	for i := range 2000 { // eight segments, the last with 208 left
		require.NoError(t, q.Push(i))
	}
	b, _ := q.Drain(nil)
	next := 2000
	allocs := testing.AllocsPerRun(100, func() {
		for range 3 {
			if err := q.Push(next); err != nil {
				t.Fatal(err)
			}
			next++
		}
		if !q.DrainAppend(&b) {
			t.Fatal("nothing placed waits, yet the append took nothing")
		}
	})
	assert.Zero(t, allocs, "copied into the batch's last segment, not a segment each")
	for range 500 { // past the last segment's room: segments linked, then room again
		require.NoError(t, q.Push(next))
		next++
		require.True(t, q.DrainAppend(&b))
	}
	for range 40 { // more than an append copies at once
		require.NoError(t, q.Push(next))
		next++
	}
	require.True(t, q.DrainAppend(&b))
	assert.Equal(t, next, b.Len())
	for i := range next {
		v, ok := b.Pop()
		require.True(t, ok)
		require.Equal(t, i, v)
		require.Equal(t, i+1, b.Taken())
	}
	assert.True(t, b.Empty())
	assert.Equal(t, 0, q.Len(), "the queue's segment, kept, holds nothing")
	require.NoError(t, q.Push(-1))
	b, _ = q.Drain(nil)
	assert.Equal(t, []int{-1}, drain(&b), "nor anything copied out of it before")
}
