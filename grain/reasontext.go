package grain

import "fmt"

// Reasons as text: Stats and DeadLetter encode with their names — a
// /debug/stats endpoint's JSON says {"stopped": 3}, not {"1": 3} — and read
// back from them. A value past the defined ones is refused both ways, so
// that it never reads back as another reason.

// MarshalText implements encoding.TextMarshaler: the reason's name, as
// String gives it. A value that names no defined reason is refused with
// ErrInvalidReason.
func (r Reason) MarshalText() ([]byte, error) {
	return nameOf(reasonNames[:], uint8(r), "Reason")
}

// UnmarshalText implements encoding.TextUnmarshaler: it reads a name that
// MarshalText writes, and refuses any other text with ErrInvalidReason.
func (r *Reason) UnmarshalText(b []byte) error {
	v, err := parseName(reasonNames[:], b)
	if err != nil {
		return err
	}
	*r = Reason(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler: the reason's name, as
// String gives it. A value that names no defined reason is refused with
// ErrInvalidReason.
func (r DeactivationReason) MarshalText() ([]byte, error) {
	return nameOf(deactivationNames[:], uint8(r), "DeactivationReason")
}

// UnmarshalText implements encoding.TextUnmarshaler: it reads a name that
// MarshalText writes, and refuses any other text with ErrInvalidReason.
func (r *DeactivationReason) UnmarshalText(b []byte) error {
	v, err := parseName(deactivationNames[:], b)
	if err != nil {
		return err
	}
	*r = DeactivationReason(v)
	return nil
}

// nameOf returns the name of value v of the type named typ.
func nameOf(names []string, v uint8, typ string) ([]byte, error) {
	if int(v) >= len(names) {
		return nil, fmt.Errorf("%w: %s(%d)", ErrInvalidReason, typ, v)
	}
	return []byte(names[v]), nil
}

// parseName returns the index of b in names.
func parseName(names []string, b []byte) (uint8, error) {
	for i, n := range names {
		if n == string(b) {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrInvalidReason, b)
}
