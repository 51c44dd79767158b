package grain

import (
	"strconv"
	"strings"
)

// MaxNotifyFailures is how many failures a NotifyError keeps in detail.
const MaxNotifyFailures = 8

// NotifyError is what Observers.Notify returns when it could not tell
// every subscriber: how many it did not tell, the first of those with why,
// and the ctx's error if it stopped early. A room whose thousand clients
// all read too slowly gives one error of a few lines, not a thousand: a
// tell's turn that returns it is logged, and the silo made each observer's
// refusal a dead letter naming its subscriber already.
//
// errors.Is and errors.As match the failures kept (the first
// MaxNotifyFailures) and the ctx's error.
type NotifyError struct {
	// Failed is how many subscribers a tell to failed (the closed observers
	// Notify dropped are not failures, nor those it did not reach because
	// ctx ended).
	Failed int
	// First holds the first failures, in the order subscribed: at most
	// MaxNotifyFailures of them.
	First []NotifyFailure
	// Stopped is the ctx's error (its cause joined, if one was given) when
	// ctx ended before every subscriber was told; nil otherwise.
	Stopped error
}

// NotifyFailure is one subscriber Notify could not tell, and why.
type NotifyFailure struct {
	ID  ID
	Err error
}

func (e *NotifyError) Error() string {
	var b strings.Builder
	b.WriteString("granary: notify: ")
	switch {
	case e.Failed == 1:
		b.WriteString("1 subscriber not told: ")
	case e.Failed > 1:
		b.WriteString(strconv.Itoa(e.Failed))
		b.WriteString(" subscribers not told: ")
	}
	for i, f := range e.First {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.ID.String())
		b.WriteString(": ")
		b.WriteString(errText(f.Err))
	}
	if more := e.Failed - len(e.First); more > 0 {
		b.WriteString(" (and ")
		b.WriteString(strconv.Itoa(more))
		b.WriteString(" more)")
	}
	if e.Stopped != nil {
		if e.Failed > 0 {
			b.WriteString("; ")
		}
		b.WriteString("stopped: ")
		b.WriteString(e.Stopped.Error())
	}
	return b.String()
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Unwrap returns the failures kept and the ctx's error, for errors.Is and
// errors.As.
func (e *NotifyError) Unwrap() []error {
	errs := make([]error, 0, len(e.First)+1)
	for _, f := range e.First {
		if f.Err != nil {
			errs = append(errs, f.Err)
		}
	}
	if e.Stopped != nil {
		errs = append(errs, e.Stopped)
	}
	return errs
}
