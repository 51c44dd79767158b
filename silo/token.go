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

// A turn that calls out while others may interleave gives the token up for
// the call and takes it back after. A handler may make several such calls at
// once, from goroutines of its own (a fan-out): the first to start gives the
// token up, the last to finish takes it back — one goroutine at a time, and
// giving it up again if another call began meanwhile. The turn's own code
// after it has waited for those goroutines runs with the token; the
// goroutines themselves run beside interleaved turns, as they run beside
// each other. x.callMu guards the calls, retaking and holdsToken of every
// turn of the grain; it is never held while waiting for the token, which an
// interleaved turn holding it may need x.callMu to give back. x.waiting
// counts the grain's turns with calls in flight.

// leaveToken is called as a call from ti's turn begins. It reports whether
// the turn began waiting (its first call in flight).
func (ti *turnInfo) leaveToken(x *actExtra) bool {
	x.callMu.Lock()
	defer x.callMu.Unlock()
	ti.calls++
	if ti.calls > 1 {
		return false
	}
	x.waiting.Add(1)
	if ti.holdsToken {
		x.token.unlock()
		ti.holdsToken = false
	} // else it is being taken back: the taker sees this call and gives it up
	return true
}

// retakeToken is called as a call from ti's turn ends.
func (ti *turnInfo) retakeToken(x *actExtra) {
	x.callMu.Lock()
	ti.calls--
	if ti.calls > 0 {
		x.callMu.Unlock()
		return
	}
	x.waiting.Add(-1)
	if ti.retaking || ti.over { // another goroutine of the turn is taking it back; or the turn is gone
		x.callMu.Unlock()
		return
	}
	ti.retaking = true
	x.callMu.Unlock()

	x.token.lock()
	x.callMu.Lock()
	ti.retaking = false
	if ti.calls > 0 || ti.over {
		x.token.unlock() // a call began meanwhile: its end takes it back; or the turn ended
	} else {
		ti.holdsToken = true
	}
	x.callMu.Unlock()
}

// endTurnToken gives the grain's turn token back at the end of tc's turn,
// w's, if the turn took it back after a call. For a ctx never reused — an
// ask's — it also marks the turn over, under the lock the calls take, so
// that a call a goroutine of the turn still has out (the handler did not
// wait for it: docs/calls.md, "Work that outlives the turn") does not take
// the token back for a turn that is gone, which would never give it up: the
// grain's next turn to wait for it waited for ever. A worker's itc (a tell
// of a kind whose turns interleave) left with a call out — or one taking
// the token back, its call just over — is marked so too, under that lock,
// and left to them: the worker makes a new one. (Read without it, a call
// taking the token back as the turn ended was missed, the ctx kept, and
// the next turn's reset wiped the taking: the token stayed held by no
// turn; TestACallEndingAsItsTurnEndsLeavesTheTokenFree.) A plain tell's
// ctx, the worker's tc, has no calls that give the token up unless it
// allows call-chain reentrancy.
func endTurnToken(w *worker, a *act, tc *turnCtx) {
	if tc.info.req == nil {
		if tc == w.itc {
			if tc.info.endOver(a.extra(), true) {
				w.itc = nil // left to its calls: the next such turn makes another
			}
		} else if tc.info.holdsToken { // it took the token back after a reentrant call
			a.extra().token.unlock()
		}
		return
	}
	if x := a.x.Load(); x != nil { // else the token, which lives there, was never taken
		tc.info.endOver(x, false)
	}
}

// endOver marks ti's turn over for its calls still out, and gives the
// grain's turn token back if the turn held it. It reports whether a call
// of the turn is still out, or taking the token back. A ctx the worker
// reuses (reused) is marked only then, and left to those calls: marked
// and reused, it would keep the next turn's calls from taking the token
// back, and that turn would run on beside interleaved ones.
func (ti *turnInfo) endOver(x *actExtra, reused bool) (left bool) {
	x.callMu.Lock()
	left = ti.calls != 0 || ti.retaking
	if left || !reused {
		ti.over = true
	}
	held := ti.holdsToken
	ti.holdsToken = false
	x.callMu.Unlock()
	if held {
		x.token.unlock()
	}
	return left
}
