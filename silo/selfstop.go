package silo

import (
	"context"
	"reflect"
	"runtime"
	"time"

	"github.com/granary-go/granary/activation"
)

// Stopping a silo from one of its own turns. Shutdown and Close wait for the
// turns in progress; called from a turn, they would wait for the turn that
// is waiting for them. So they first ask whether they run inside a turn:
// the turn's own ctx says so precisely (and of which silo); a caller that
// passed another ctx, or none (Close), is found by its stack — every turn
// runs user code under activation.Run, Activate or Deactivate. The stack
// cannot tell which silo's turn it is, so a turn of another silo counts too:
// then the stop is merely not waited for, which is never a deadlock.

// fromTurn reports whether the caller, passing ctx, runs inside a grain's
// turn.
func (s *Silo) fromTurn(ctx context.Context) bool {
	if ti := turnFrom(ctx); ti != nil && ti.a.k.s == s {
		return true
	}
	return onTurnStack()
}

// onTurnStack reports whether a grain's turn is on the caller's stack. It
// reads a short stack into an array of its own first, and looks each
// frame up by its PC alone (runtime.FuncForPC, which names the innermost
// function of an inlined call): runtime.CallersFrames would keep the PCs
// on the heap and build a Frame for each.
func onTurnStack() bool {
	var small [64]uintptr
	pcs := small[:]
	n := runtime.Callers(2, pcs)
	if n == len(pcs) {
		pcs = make([]uintptr, 1024) // a deep handler still has its turn in sight
		n = runtime.Callers(2, pcs)
	}
	hooks := [...]string{funcName(activation.Run), funcName(activation.Activate), funcName(activation.Deactivate)}
	for _, pc := range pcs[:n] {
		f := runtime.FuncForPC(pc - 1) // a return address: the call is the instruction before
		if f == nil {
			continue
		}
		name := f.Name()
		for _, h := range hooks {
			if name == h {
				return true
			}
		}
	}
	return false
}

func funcName(f any) string {
	return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
}

// shutdownFromTurn begins a graceful stop and leaves the waiting to a
// goroutine of its own, bounded by ctx's deadline if it has one (read now:
// the turn's ctx must not be kept past the turn).
func (s *Silo) shutdownFromTurn(ctx context.Context) error {
	deadline, bounded := ctx.Deadline()
	if !s.beginStop(opShutdown) {
		select {
		case <-s.done:
			return nil // stopped already (or never started): nothing to wait for
		default:
			return ErrShutdownFromTurn
		}
	}
	s.boundSettling(ctx)
	go func() {
		expired := make(chan struct{}) // never closed without a deadline
		if bounded {
			t := time.AfterFunc(time.Until(deadline), func() { close(expired) })
			defer t.Stop()
		}
		s.drainOrClose(expired)
	}()
	return ErrShutdownFromTurn
}

// Done returns a channel closed once the silo has stopped: every partition,
// and the turns it waited for, done. For a program that starts its
// shutdown from a grain (see ErrShutdownFromTurn).
func (s *Silo) Done() <-chan struct{} {
	if s.made() != nil { // nothing runs, nothing to wait for
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.done
}
