package grain

import (
	"fmt"
	"runtime"
	"strings"
)

// PanicError is what a caller gets when the grain panicked while handling its
// message (or in OnActivate). It matches ErrPanic.
type PanicError struct {
	ID    ID
	Value any // the value passed to panic
	// pcs is the panicking goroutine's stack as Recovered took it: program
	// counters, formatted only if Stack is called.
	pcs []uintptr
}

// Recovered returns the PanicError of the grain id for v, the value
// recover returned, taking the stack of the goroutine that panicked. Call
// it from the deferred function that recovered, or from a function that
// one calls: the stack is read there, where the panic still is.
//
// The stack is taken as program counters — about a microsecond — and
// formatted only when Stack is called. Printed at every panic
// (runtime/debug.Stack), it cost 30–70 µs and took the runtime's print
// lock, which is the whole process's: a storm of panicking tells on two
// cores spent nine tenths of its time there.
func Recovered(id ID, v any) *PanicError {
	var buf [maxPanicFrames]uintptr
	n := runtime.Callers(2, buf[:]) // from Recovered's caller on
	return &PanicError{ID: id, Value: v, pcs: append([]uintptr(nil), buf[:n]...)}
}

// maxPanicFrames bounds the stack Recovered takes: the innermost calls,
// where the panic is, come first.
const maxPanicFrames = 64

func (e *PanicError) Error() string {
	return fmt.Sprintf("granary: grain %v panicked: %v", e.ID, e.Value)
}
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap returns the panic value if it is an error, so errors.Is sees through
// panic(err).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Stack returns the stack of the goroutine that panicked, from the panic
// inward-out: a line for each call with its function, and under it, indented
// by a tab, its file and line — a Go traceback's form, without the
// arguments. The calls that recovered the panic are left out. It is empty
// for a PanicError Recovered did not make. Safe for concurrent use.
func (e *PanicError) Stack() string {
	var b strings.Builder
	frames := runtime.CallersFrames(e.pcs)
	for more := len(e.pcs) > 0; more; {
		var f runtime.Frame
		f, more = frames.Next()
		name := f.Function
		if name == "runtime.gopanic" {
			b.Reset() // the calls before it are those that recovered
			name = "panic"
		}
		if name != "" && name != "runtime.goexit" { // every goroutine's first call: a traceback leaves it out
			fmt.Fprintf(&b, "%s(...)\n\t%s:%d\n", name, f.File, f.Line)
		}
	}
	if len(e.pcs) == maxPanicFrames {
		b.WriteString("...additional frames elided...\n")
	}
	return b.String()
}
