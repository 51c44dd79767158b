package silo

import (
	"fmt"

	"github.com/granary-go/granary/grain"
)

// A call from a grain's turn made with a ctx that is not the turn's —
// context.Background(), a ctx kept in a struct — carries no call chain: a
// cycle through it (the grain calling itself, a callee calling back) is a
// deadlock the silo cannot see, and ends only at the call's timeout. Go
// has no goroutine-local state to find the calling turn by, and the
// caller's stack (onTurnStack) costs 1.5–2 µs to read, 20 frames deep
// (BenchmarkOnTurnStack) — twice a call's round trip, too much for every
// call from outside a turn. So the stack is read only where the cost
// is fine: at every such call when Config.CheckContexts is on (for tests:
// the call fails at once with grain.ErrForeignContext, before any cycle),
// and, in every silo, at such a call's timeout (the TimeoutError then says
// the ctx was likely why).

// checkCallCtx refuses a call made with a ctx that carries no turn from a
// goroutine that runs a grain's turn, when s checks contexts.
func (s *Silo) checkCallCtx(ti *turnInfo, id grain.ID, msg any) error {
	if ti != nil || !s.cfg.CheckContexts || !onTurnStack() {
		return nil
	}
	return fmt.Errorf("%w: a call of %T to %v; pass the turn's ctx on (context.WithoutCancel(ctx) for a call that outlives the turn)",
		grain.ErrForeignContext, msg, id)
}

// timedOut is the error of a call to id that timed out with cause; ti is
// the calling turn's, nil when the ctx carried none.
func timedOut(ti *turnInfo, id grain.ID, cause error) error {
	te := &grain.TimeoutError{ID: id, Cause: cause}
	if ti == nil {
		te.ForeignContext = onTurnStack()
	}
	return te
}
