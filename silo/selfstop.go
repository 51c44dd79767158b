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
// reads a short stack into an array of its own first, and looks up only
// the frames that may be a hook's, by their PC (runtime.CallersFrames
// would keep the PCs on the heap and build a Frame for each).
func onTurnStack() bool {
	var small [64]uintptr
	pcs := small[:]
	n := runtime.Callers(2, pcs)
	if n == len(pcs) {
		pcs = make([]uintptr, 1024) // a deep handler still has its turn in sight
		n = runtime.Callers(2, pcs)
	}
	// The hooks' entries, read off their func values: their names, looked
	// up and compared at every frame, cost a call 1.5–1.7 µs, 20 frames
	// deep (BenchmarkOnTurnStack).
	hooks := [...]uintptr{entryOf(activation.Run), entryOf(activation.Activate), entryOf(activation.Deactivate)}
	for _, pc := range pcs[:n] {
		for _, h := range hooks {
			// A frame of a hook returns into it, past its entry and
			// within its code; only such a frame is looked up (the
			// lookup, at every frame, was most of the rest).
			if pc-h >= maxHookSize {
				continue
			}
			// The outermost function's entry, for a call inlined into
			// it: the hooks, which defer, are never inlined.
			if f := runtime.FuncForPC(pc - 1); f != nil && f.Entry() == h { // pc - 1: the call, before its return address
				return true
			}
		}
	}
	return false
}

// maxHookSize bounds the code of the hooks onTurnStack looks for: a frame
// whose return address lies further past a hook's entry is not the hook's.
const maxHookSize = 64 << 10

// entryOf returns the entry PC of the top-level function f.
func entryOf(f any) uintptr { return reflect.ValueOf(f).Pointer() }

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
