// Package ctxerr says why a context ended, in one error that matches both
// the context's error and the cause it was given. Granary's packages report
// every ended ctx with it.
package ctxerr

import "context"

// Of reports why ctx ended, or nil if it has not: ctx.Err(), which
// errors.Is context.Canceled or context.DeadlineExceeded however ctx ended,
// and its cause as well where one was given (context.WithCancelCause,
// WithTimeoutCause, WithDeadlineCause). Reporting only ctx.Err() loses the
// cause; only context.Cause(ctx), the error's kind — an ask whose deadline
// passed while it waited was reported as the bare cause, no timeout, no
// context.DeadlineExceeded. It is a call (not inlined): a hot path checks
// ctx.Err() itself first.
func Of(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return &causeError{err: err, cause: cause}
	}
	return err
}

// causeError is a ctx's error with the cause it was given.
type causeError struct{ err, cause error }

func (e *causeError) Error() string   { return e.err.Error() + ": " + e.cause.Error() }
func (e *causeError) Unwrap() []error { return []error{e.err, e.cause} }
