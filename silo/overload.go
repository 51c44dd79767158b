package silo

import "github.com/granary-go/granary/grain"

// overloadError is ErrOverloaded naming what refused the message: a grain
// whose backlog is full, or an observer whose buffer is. It is made on the
// refusal path, which a hot grain's senders take for every message while
// it sheds load, so its text is built only if someone reads it: one
// allocation, where fmt.Errorf took four (BenchmarkTellOverloaded).
type overloadError struct {
	id       grain.ID
	observer bool
}

func (e *overloadError) Error() string {
	if e.observer {
		return grain.ErrOverloaded.Error() + ": observer " + e.id.String() + ", its buffer full"
	}
	return grain.ErrOverloaded.Error() + ": " + e.id.String()
}

func (e *overloadError) Unwrap() error { return grain.ErrOverloaded }
