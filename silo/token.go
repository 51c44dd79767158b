package silo

import "sync"

// fifoToken is a grain's turn token for interleaving: a lock granted in the
// order it was asked for. The partition owner reserves a place for each
// interleaved turn as it dispatches it, so interleaved turns start in the
// order their messages arrived; a turn coming back from a call queues behind
// them, as a continuation would in Orleans. The zero value is free.
// Safe for concurrent use.
type fifoToken struct {
	mu      sync.Mutex
	held    bool
	waiters []chan struct{}
}

// reserve queues a claim on the token and returns a channel closed when the
// claim holds it.
func (t *fifoToken) reserve() <-chan struct{} {
	ch := make(chan struct{})
	t.mu.Lock()
	if !t.held {
		t.held = true
		close(ch)
	} else {
		t.waiters = append(t.waiters, ch)
	}
	t.mu.Unlock()
	return ch
}

// lock waits for the token.
func (t *fifoToken) lock() { <-t.reserve() }

// unlock hands the token to the oldest claim, or frees it.
func (t *fifoToken) unlock() {
	t.mu.Lock()
	if len(t.waiters) > 0 {
		ch := t.waiters[0]
		t.waiters[0] = nil
		t.waiters = t.waiters[1:]
		close(ch) // still held: now by that claim
	} else {
		t.held = false
	}
	t.mu.Unlock()
}
