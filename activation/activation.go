package activation

import "github.com/granary-go/granary/grain"

// Activation is the runtime's record of one live grain: its identity, where
// it is in its lifecycle, and the messages waiting for its next turn. A
// runtime embeds it in its own per-activation record, and keeps a Restarts
// history apart for the few grains that restart. The zero Activation is
// Activating with an empty mailbox.
type Activation struct {
	ID      grain.ID
	Mailbox Mailbox
	state   State
	// Marks is a set of bits the runtime owns; this package never reads or
	// writes it. It sits where padding would be, as does Turns: an
	// activation record is kept small because a silo holds millions.
	Marks uint8
	// Round is a stamp the runtime owns, in what would otherwise be
	// padding too: Granary's partition owner writes there the round in
	// which the grain last ran a turn as its message came, and whether its
	// handoff monitor looked during one of them (the low bit).
	Round uint16
	// Turns counts the activation's turns in flight (more than one only
	// when the runtime interleaves turns). The runtime keeps it.
	Turns int32
}

// State returns the lifecycle state.
func (a *Activation) State() State { return a.state }

// Transition moves the activation to state to, or returns a
// *TransitionError and changes nothing if the lifecycle forbids the move.
func (a *Activation) Transition(to State) error {
	if !CanTransition(a.state, to) {
		return &TransitionError{From: a.state, To: to}
	}
	a.state = to
	return nil
}
