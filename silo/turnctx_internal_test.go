package silo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
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
