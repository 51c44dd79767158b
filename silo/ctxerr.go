package silo

import "context"

// ctxErr reports why ctx ended, or nil if it has not: ctx.Err(), which
// errors.Is context.Canceled or context.DeadlineExceeded however ctx ended,
// and its cause as well where one was given (context.WithCancelCause,
// WithTimeoutCause, WithDeadlineCause). Every error of the silo that says a
// ctx ended is this one, so that it matches both wherever it comes from: an
// ask whose deadline passed while it waited was reported as the bare cause —
// no *grain.TimeoutError, no context.DeadlineExceeded — and one whose
// deadline had passed before it was sent as a timeout without the cause.
func ctxErr(ctx context.Context) error {
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
