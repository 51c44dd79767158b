package silo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/queues"
)

// merged.afterFunc keeps the context package's promises: f runs once, when
// the turn's ctx ends, unless stopped first; stop reports whether it
// stopped f; a registration on an ended ctx runs f (on a goroutine).
func TestMergedAfterFunc(t *testing.T) {
	m := &merged{done: make(chan struct{})}
	ran := make(chan int, 3)
	stop1 := m.afterFunc(func() { ran <- 1 })
	stop2 := m.afterFunc(func() { ran <- 2 })
	assert.True(t, stop1(), "stopped before the ctx ended")
	assert.False(t, stop1(), "stopped already")
	assert.Len(t, m.after, 1)
	m.cancel(context.Canceled)
	m.cancel(context.DeadlineExceeded) // a second cancel changes nothing
	assert.Equal(t, 2, <-ran)
	assert.False(t, stop2(), "it ran")
	assert.Equal(t, context.Canceled, m.err)
	assert.Nil(t, m.after)

	stop3 := m.afterFunc(func() { ran <- 3 })
	assert.Equal(t, 3, <-ran, "registered on an ended ctx: runs at once")
	assert.False(t, stop3())
	assert.Empty(t, ran)
}

// A ctx that reports no error once done (a caller's own implementation)
// still ends the turn's once, as Canceled.
func TestMergedCancelWithNoError(t *testing.T) {
	m := &merged{done: make(chan struct{})}
	m.cancel(nil)
	m.cancel(nil)
	<-m.done
	assert.Equal(t, context.Canceled, m.err)
}

// A partition's live handler ctxs end with the silo: those registered, and
// any registered after (a handler the silo gave up on, reading its ctx
// late); one whose turn ended is no longer held.
func TestLiveCtxsEndWithTheSilo(t *testing.T) {
	var l liveCtxs
	a, b := &merged{done: make(chan struct{})}, &merged{done: make(chan struct{})}
	l.add(a)
	l.add(b)
	l.remove(b) // its turn ended
	assert.Len(t, l.m, 1)
	l.end()
	<-a.done
	assert.Equal(t, context.Canceled, a.err)
	assert.Nil(t, b.err, "removed: not ended by the silo")
	late := &merged{done: make(chan struct{})}
	l.add(late)
	<-late.done
	assert.Empty(t, l.m)
}

// An ask's turn ctx whose caller's ctx has ended, its caller not having
// given up on it yet (it does so once it sees its own ctx end), reads the
// error from its parent — and once it has said it, never says nil: a Done
// channel made after that ends at once. Before, the channel, made after
// the parent had ended, waited for the caller, and Err read it: nil, where
// it had said Canceled — an Ask with that ctx read its error twice and
// panicked on the nil in between. Its turn's end the same way.
func TestATurnCtxNeverSaysNilAfterAnError(t *testing.T) {
	p := &partition{base: t.Context()}
	parent, cancel := context.WithCancel(t.Context())
	req := queues.NewRequest(parent, nil)
	c := &turnCtx{parent: parent, home: p}
	c.info.req = req
	assert.NoError(t, c.Err())
	cancel()
	assert.Equal(t, context.Canceled, c.Err(), "from its parent")
	assertClosed(t, c.Done())
	assert.Equal(t, context.Canceled, c.Err())

	p2 := &partition{base: t.Context()}
	ended := &turnCtx{parent: t.Context(), home: p2}
	ended.info.req = req
	ended.end() // the turn's end, which found no channel to close
	assert.Equal(t, context.Canceled, ended.Err())
	assertClosed(t, ended.Done())
	assert.Equal(t, context.Canceled, ended.Err())
	assert.Empty(t, p2.live.m, "not held for Close: its turn is over")

	// A channel made while the parent lived: the parent's end is read
	// into it by Err, not left to the caller.
	live, cancel2 := context.WithCancel(t.Context())
	c2 := &turnCtx{parent: live, home: p}
	c2.info.req = req
	d := c2.Done()
	cancel2()
	assert.Equal(t, context.Canceled, c2.Err())
	assertClosed(t, d)
}

// assertClosed checks that d is closed already.
func assertClosed(t *testing.T, d <-chan struct{}) {
	t.Helper()
	select {
	case <-d:
	default:
		t.Error("Done is open where Err has said an error")
	}
}
