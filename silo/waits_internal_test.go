package silo

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// A grain's calls out are kept exactly: with two out, a walk follows
// neither; once one is over, it follows the other — which grain's turn
// waits on what is known again. (One unknown call stayed unknown until
// every call of the grain was over: a reentrant grain that had had two
// turns waiting at once closed no verdict after, and a cycle through it
// waited for the deadline.)
func TestAGrainsCallsOutAreKeptExactly(t *testing.T) {
	var w waitShard
	ctx := t.Context()
	a, b, c := grain.NewID("k", "a"), grain.NewID("k", "b"), grain.NewID("k", "c")
	r1, r2, r3 := queues.NewRequest(ctx, nil), queues.NewRequest(ctx, nil), queues.NewRequest(ctx, nil)
	follows := func(id grain.ID) *queues.Request {
		if calls := w.placeCalls(id, 1, false, false, nil); len(calls) == 1 {
			return calls[0].req
		}
		return nil
	}

	w.start(a, 1, r1, b, 2, false, false, nil, nil, false)
	assert.Same(t, r1, follows(a))
	w.start(a, 1, r2, c, 3, false, false, nil, nil, false)
	assert.Nil(t, follows(a), "two calls out")
	w.end(1, r1, nil)
	assert.Same(t, r2, follows(a), "the one left")
	one := w.placeCalls(a, 1, false, false, nil)
	assert.Equal(t, c, one[0].target)
	assert.Equal(t, uint64(3), one[0].thash)
	w.start(a, 1, r1, b, 2, false, false, nil, nil, false)
	w.end(1, r1, nil)
	assert.Same(t, r2, follows(a), "the later one over, the first is left")
	w.end(1, r2, nil)
	assert.Empty(t, w.m, "nothing out: no entry")

	// Two grains of one hash: the entry knows neither until both are over.
	w.start(a, 1, r1, b, 2, false, false, nil, nil, false)
	w.start(b, 1, r2, c, 3, false, false, nil, nil, false)
	w.end(1, r1, nil)
	assert.Nil(t, follows(a))
	assert.Nil(t, follows(b), "the call left is b's, the entry a's")
	w.end(1, r2, nil)
	w.start(b, 1, r3, c, 3, false, false, nil, nil, false)
	assert.Same(t, r3, follows(b), "a fresh entry")
	w.end(1, r3, nil)

	// hold marks every call out, and those made after it.
	var held atomic.Bool
	w.start(a, 1, r1, b, 2, false, false, &held, nil, false)
	w.start(a, 1, r2, c, 3, false, false, &held, nil, false)
	w.hold(a, 1, &held)
	w.start(a, 1, r3, c, 3, false, false, &held, nil, false)
	assert.True(t, w.hookWaits(a, 1), "three calls out, every one held: it lets nothing in")
	assert.Len(t, w.placeCalls(a, 1, false, false, nil), 3)
	assert.Nil(t, follows(a), "which one it waits on is not known")
	w.end(1, r1, nil)
	w.end(1, r3, nil)
	assert.True(t, w.hookWaits(a, 1), "its one call left, marked by hold")
	w.end(1, r2, nil)
	w.start(a, 1, r3, c, 3, false, false, &held, nil, false)
	assert.True(t, w.hookWaits(a, 1), "a call made after hold")
	w.end(1, r3, nil)
	w.start(a, 1, r1, b, 2, false, false, nil, nil, false)
	assert.False(t, w.hookWaits(a, 1), "a grain that is not held")
	w.start(a, 1, r2, c, 3, false, false, &held, nil, false)
	assert.False(t, w.hookWaits(a, 1), "one call not held: an instance before the Stop's")
	assert.Nil(t, w.placeCalls(a, 1, false, false, nil))
	assert.Len(t, w.placeCalls(a, 1, true, false, nil), 2, "a kind that lets nothing in: every call")
	w.end(1, r1, nil)
	w.end(1, r2, nil)

	// A call's end returns the calls of its turn still out, to walk again
	// from.
	t1, t2 := &turnInfo{}, &turnInfo{}
	r4 := queues.NewRequest(ctx, nil)
	w.start(a, 1, r1, b, 2, false, false, nil, t1, false)
	w.start(a, 1, r2, c, 3, false, false, nil, t1, false)
	w.start(a, 1, r3, c, 3, false, false, nil, t2, false)
	w.start(a, 1, r4, b, 2, false, false, nil, t1, false)
	left := w.end(1, r1, nil)
	assert.ElementsMatch(t, []*queues.Request{r2, r4}, reqs(left), "the fan-out's calls left, not the other turn's")
	assert.Len(t, w.end(1, r4, left[:0]), 1, "one left")
	assert.Empty(t, w.end(1, r2, nil), "its turn has nothing out")
	assert.Empty(t, w.end(1, r3, nil), "nothing out at all")
	assert.Empty(t, w.m)
}

// reqs returns the requests of calls.
func reqs(calls []waitCall) []*queues.Request {
	out := make([]*queues.Request, len(calls))
	for i, c := range calls {
		out[i] = c.req
	}
	return out
}

// Recording a grain's call out and its end allocates nothing once the
// shard has had a call: the edge goes back to the shard's spares
// (waitShard.drop). Kept in the map by value, a 160-byte edge was
// allocated at each insert — a Go map keeps a value past 128 bytes apart —
// one allocation of every call between grains. A spare holds nothing of
// the calls it recorded.
func TestACallOutRecordedAllocatesNothing(t *testing.T) {
	var w waitShard
	a, b := grain.NewID("k", "a"), grain.NewID("k", "b")
	req := queues.NewRequest(t.Context(), nil)
	call := func() {
		w.start(a, 1, req, b, 2, false, false, nil, nil, false)
		w.end(1, req, nil)
	}
	call()
	assert.Zero(t, testing.AllocsPerRun(100, call))
	assert.Empty(t, w.m)
	if assert.Len(t, w.free, 1) {
		assert.Equal(t, waitEdge{}, *w.free[0], "a spare edge keeps its last call's request")
	}
}
