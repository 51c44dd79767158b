package activation

import "github.com/granary-go/granary/grain"

// Activation is the runtime's record of one live grain: its identity, where
// it is in its lifecycle, the messages waiting for its next turn, and its
// restart history. A runtime embeds it in its own per-activation record. The
// zero Activation is Activating with an empty mailbox.
type Activation struct {
	ID       grain.ID
	Mailbox  Mailbox
	Restarts Restarts
	state    State
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
