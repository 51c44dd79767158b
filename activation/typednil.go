package activation

import (
	"fmt"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/nilness"
)

// CheckError returns err as a grain's code returned it, or, for a typed nil
// — a nil pointer, map, slice, func or chan held in a non-nil error — an
// error matching grain.ErrTypedNil that names id and the type. The typed nil
// itself goes no further: whoever matched it with errors.Is or errors.As
// would call its methods on a nil receiver, and a panic there, on a
// partition's goroutine, would take the process down.
func CheckError(id grain.ID, err error) error {
	if err == nil || !nilness.Of(err) {
		return err
	}
	return fmt.Errorf("%w: %v returned a nil %T as its error (return a nil error for success)", grain.ErrTypedNil, id, err)
}
