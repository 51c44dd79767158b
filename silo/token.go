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

// tryLock takes the token if it is free, and reports whether it did.
func (t *fifoToken) tryLock() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held {
		return false
	}
	t.held = true
	return true
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
// counts the grain's turns with calls in flight — turns, not calls: a turn
// that ended with calls of its goroutines still out (the handler did not
// wait for them) waits no more, and is counted out as it ends (markOver),
// else the grain, open to interleaving while no turn waited, let a
// message in beside its next turn, which runs without the token.

// leaveToken is called as a call from ti's turn begins. It reports whether
// the turn began waiting (its first call in flight). The token goes at
// once (Await), or, untilQueued, once the call's request is queued (Ask,
// then queued): a turn let in meanwhile that sent the same grain would
// have overtaken the request, though it began after the call did — the
// grain's own sends out of order. A turn that never held the token (an
// ordinary turn's first call) takes it for that while, if it is free (it
// is, unless another goroutine of the turn is taking it back).
func (ti *turnInfo) leaveToken(x *actExtra, untilQueued bool) bool {
	x.callMu.Lock()
	defer x.callMu.Unlock()
	ti.calls++
	if ti.calls > 1 || ti.over { // a goroutine's call begun as its turn ended: no turn waits
		return false
	}
	x.waiting.Add(1)
	switch {
	case ti.holdsToken:
		ti.holdsToken = false
		if untilQueued {
			ti.queuing = true
		} else {
			x.token.unlock()
		}
	case untilQueued && !ti.retaking && x.token.tryLock():
		ti.queuing = true
	} // else it is being taken back: the taker sees this call and gives it up
	return true
}

// queued gives the grain's turn token up if a call of ti's turn holds it
// until its request is queued (leaveToken): called once the request is
// queued. It holds it through a wait for room — at a grain's door, in a
// partition queue — as a tell from a turn holding it does: a turn let in
// meanwhile could send the same grain ahead of it
// (TestAReentrantGrainsAsksThroughAHeldDoorKeepTheirOrder).
func (ti *turnInfo) queued(x *actExtra) {
	x.callMu.Lock()
	defer x.callMu.Unlock()
	if ti.queuing {
		ti.queuing = false
		x.token.unlock()
	}
}

// retakeToken is called as a call from ti's turn ends.
func (ti *turnInfo) retakeToken(x *actExtra) {
	x.callMu.Lock()
	ti.calls--
	if ti.calls > 0 {
		x.callMu.Unlock()
		return
	}
	if ti.over { // the turn is gone, counted out of the waiting as it ended
		x.callMu.Unlock()
		return
	}
	x.waiting.Add(-1)
	if ti.retaking { // another goroutine of the turn is taking it back
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
// w's, if the turn took it back after a call; and, for a ctx never reused
// — an ask's, or an interleaving tell's (w.itc, reused only if no call
// held it: turnCtxFor) — marks the turn over, under the lock the calls take, so
// that a call a goroutine of the turn still has out (the handler did not
// wait for it: docs/calls.md, "Work that outlives the turn"), or is just
// taking the token back as its call ended, takes nothing back for a turn
// that is gone, which would never give it up: the grain's next turn to
// wait for it waited for ever (TestACallStillOutWhenItsTurnEndsTakesNoTokenBack,
// TestACallEndingAsItsTurnEndsLeavesTheTokenFree). An interleaving tell's
// ctx was once the worker's, reset for its next such turn: a goroutine's
// call that read the turn as it ended then took the token back for the
// next one, or for no turn — in the chaos program, with turns that fan out
// and take their first reply, a reentrant grain stuck for good. A plain
// tell's ctx, the worker's tc, has no calls that give the token up unless
// it allows call-chain reentrancy.
func endTurnToken(w *worker, a *act, tc *turnCtx) {
	if tc.info.req == nil {
		if tc == w.itc {
			// Over for calls from here (ownCtx.info), before used is read:
			// a call that has not marked it used by now never gets the info.
			tc.gen.Add(1)
			if tc.used() {
				tc.info.endOver(a.extra())
				return
			}
		}
		if tc.info.holdsToken { // an interleaved turn's; or one that took the token back after a reentrant call
			tc.info.holdsToken = false
			a.extra().token.unlock()
		}
		return
	}
	if x := a.x.Load(); x != nil { // else the token, which lives there, was never taken
		tc.info.endOver(x)
	}
}

// endOver marks ti's turn over (markOver), and gives the grain's turn
// token back if the turn held it.
func (ti *turnInfo) endOver(x *actExtra) {
	x.callMu.Lock()
	ti.markOver(x)
	held := ti.holdsToken
	ti.holdsToken = false
	x.callMu.Unlock()
	if held {
		x.token.unlock()
	}
}

// markOver marks ti's turn over for its calls still out, which then take
// nothing back for it (retakeToken), and counts it out of the grain's
// waiting turns if it was one. x.callMu is held.
func (ti *turnInfo) markOver(x *actExtra) {
	if ti.over {
		return
	}
	ti.over = true
	if ti.calls > 0 {
		x.waiting.Add(-1)
	}
}
