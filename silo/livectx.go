package silo

import (
	"context"
	"sync"
)

// liveCtxs holds the merged Done channels of a partition's turns that made
// one (a handler that read its ctx's Done), so that Close can end them:
// an entry in a set of the partition's for each, rather than a
// context.AfterFunc with the partition's base ctx, which cost three
// allocations a call (BenchmarkCallWatching). Safe for concurrent use.
type liveCtxs struct {
	mu    sync.Mutex
	ended bool // the silo's base ctx has ended: what comes now ends at once
	m     map[*merged]struct{}
}

// add registers m, or ends it at once if the silo has closed.
func (l *liveCtxs) add(m *merged) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		m.cancel(context.Canceled)
		return
	}
	if l.m == nil {
		l.m = make(map[*merged]struct{})
	}
	l.m[m] = struct{}{}
	l.mu.Unlock()
}

// remove unregisters m, whose turn has ended.
func (l *liveCtxs) remove(m *merged) {
	l.mu.Lock()
	delete(l.m, m)
	l.mu.Unlock()
}

// end ends every registered channel, and those registered later, as the
// silo's base ctx ends.
func (l *liveCtxs) end() {
	l.mu.Lock()
	l.ended = true
	ms := l.m
	l.m = nil
	l.mu.Unlock()
	for m := range ms {
		m.cancel(context.Canceled)
	}
}
