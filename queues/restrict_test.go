package queues_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/queues"
)

// pushLate pushes v late, and gives up its place if the lane is full.
func pushLate(q *queues.Queue[int, int], v int) error {
	space, _, err := q.PushLateOrWait(&v, nil)
	if errors.Is(err, queues.ErrFull) {
		q.GiveUp(space)
	}
	return err
}

// A restricted queue refuses ordinary pushes and takes late ones, until it
// is closed; its set counts it busy again after a push to it while idle.
func TestRestrictedQueueTakesLatePushesOnly(t *testing.T) {
	var busy atomic.Int64
	busy.Store(2)
	a, b := queues.New[int, int](0), queues.New[int, int](0)
	require.NoError(t, a.Push(1))
	a.Restrict(&busy)
	b.Restrict(&busy)
	require.ErrorIs(t, a.Push(2), queues.ErrClosed)
	require.NoError(t, pushLate(a, 3))

	marked, _ := a.MarkIdle()
	assert.False(t, marked, "a holds messages")
	bat, _ := a.Drain(nil)
	assert.Equal(t, []int{1, 3}, drain(&bat))

	marked, last := a.MarkIdle()
	assert.True(t, marked)
	assert.False(t, last, "b is busy")
	marked, _ = a.MarkIdle()
	assert.False(t, marked, "idle already: counted out once")
	assert.EqualValues(t, 1, busy.Load())

	require.NoError(t, pushLate(a, 4)) // work under way reaches a: busy again
	assert.EqualValues(t, 2, busy.Load())
	marked, last = b.MarkIdle()
	assert.True(t, marked)
	assert.False(t, last, "a is busy again")
	bat, _ = a.Drain(nil)
	assert.Equal(t, []int{4}, drain(&bat))
	b.PushControl(7) // a control item wakes an idle queue too
	assert.EqualValues(t, 2, busy.Load())
	_, ctl := b.Drain(nil)
	assert.Equal(t, []int{7}, ctl)
	_, last = a.MarkIdle()
	assert.False(t, last)
	_, last = b.MarkIdle()
	assert.True(t, last, "both idle at once")
	assert.Zero(t, busy.Load())

	a.Close()
	require.ErrorIs(t, pushLate(a, 5), queues.ErrClosed)
	require.ErrorIs(t, a.Push(5), queues.ErrClosed)
	marked, _ = a.MarkIdle()
	assert.False(t, marked, "a closed queue is not counted")
	a.PushControl(8)
	assert.Zero(t, busy.Load(), "nor is a push to it")
}

// A queue that is not restricted is never marked; a closed one is not
// reopened by Restrict.
func TestMarkIdleNeedsRestrict(t *testing.T) {
	var busy atomic.Int64
	q := queues.New[int, int](0)
	marked, _ := q.MarkIdle()
	assert.False(t, marked)
	q.Close()
	q.Restrict(&busy)
	require.ErrorIs(t, pushLate(q, 1), queues.ErrClosed)
}

// A sender waiting for room in a full queue is woken by Restrict, and an
// ordinary push then finds the queue restricted; a late one waits on.
func TestRestrictWakesWaitingSenders(t *testing.T) {
	var busy atomic.Int64
	busy.Store(1)
	q := queues.New[int, int](1)
	require.NoError(t, q.Push(1))
	v := 2
	space, _, err := q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	q.Restrict(&busy)
	<-space
	_, _, err = q.PushOrWait(&v, space)
	require.ErrorIs(t, err, queues.ErrClosed)
	space, _, err = q.PushLateOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	bat, _ := q.Drain(nil)
	<-space
	assert.Equal(t, []int{1}, drain(&bat))
	_, _, err = q.PushLateOrWait(&v, space)
	require.NoError(t, err)
}

// Queues marked idle and pushed to from many goroutines: the set is quiet
// (busy reaches zero) only when every queue was drained after its last
// push. Run with -race.
func TestQuietSetUnderConcurrentPushes(t *testing.T) {
	const n, each = 4, 2000
	var busy atomic.Int64
	busy.Store(n)
	qs := make([]*queues.Queue[int, int], n)
	for i := range qs {
		qs[i] = queues.New[int, int](0)
		qs[i].Restrict(&busy)
	}
	var sent sync.WaitGroup
	for i := range n {
		sent.Go(func() {
			for j := range each {
				require.NoError(t, pushLate(qs[(i+j)%n], j))
			}
		})
	}
	sent.Wait()
	got := 0
	for _, q := range qs {
		b, _ := q.Drain(nil)
		got += len(drain(&b))
	}
	assert.Equal(t, n*each, got)
	lasts := 0
	for _, q := range qs {
		if _, last := q.MarkIdle(); last {
			lasts++
		}
	}
	assert.Equal(t, 1, lasts)
}
