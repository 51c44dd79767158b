package silo

import (
	"errors"
	"log/slog"

	"github.com/granary-go/granary/grain"
)

// withStack appends to args a "stack" attribute for a line about err, when
// err is or wraps a *grain.PanicError: the stack of the goroutine that
// panicked, formatted by the Logger's handler — on the silo's log
// goroutine, and only for a line that is written (a storm's sampled-out
// lines never make it). A tell's panic was logged with its value alone,
// and where it came from went nowhere.
func withStack(args []any, err error) []any {
	if pe := panicIn(err); pe != nil {
		args = append(args, "stack", panicStack{pe})
	}
	return args
}

// panicIn is errors.As for a *grain.PanicError in an error a grain
// returned: one whose own As or Unwrap panics yields none (see matches).
func panicIn(err error) (pe *grain.PanicError) {
	defer func() {
		if recover() != nil {
			pe = nil
		}
	}()
	if !errors.As(err, &pe) {
		return nil
	}
	return pe
}

// panicStack is a PanicError's stack as a slog value, formatted when the
// handler resolves it.
type panicStack struct{ pe *grain.PanicError }

func (s panicStack) LogValue() slog.Value { return slog.StringValue(s.pe.Stack()) }
