package activation

import "fmt"

// State is where an activation is in its lifecycle.
type State uint8

// The lifecycle states.
const (
	// Activating: the factory and OnActivate run (or wait to); messages queue.
	Activating State = iota
	// Active: turns run.
	Active
	// Backoff: a failed instance was dropped; a fresh one is built when the
	// restart backoff has passed. Messages queue.
	Backoff
	// Deactivating: OnDeactivate runs; new messages queue for the next
	// activation.
	Deactivating
	// Gone: out of the directory. Terminal.
	Gone
)

var stateNames = [...]string{"activating", "active", "backoff", "deactivating", "gone"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// allowed[from] is the set of states reachable from from.
var allowed = [...][]State{
	// Backoff: a record whose instance is not built yet waits out a
	// restart's backoff (its predecessor, given up on in the OnDeactivate
	// that runs before a restart, left it the restart)
	Activating:   {Active, Gone, Deactivating, Backoff},
	Active:       {Backoff, Deactivating, Gone},
	Backoff:      {Activating, Deactivating, Gone},
	Deactivating: {Backoff, Gone}, // Backoff: a failed instance's OnDeactivate ran before its restart
	Gone:         nil,
}

// CanTransition reports whether the lifecycle allows from -> to.
func CanTransition(from, to State) bool {
	if int(from) >= len(allowed) {
		return false
	}
	for _, s := range allowed[from] {
		if s == to {
			return true
		}
	}
	return false
}

// TransitionError reports a move the lifecycle does not allow: a runtime bug,
// surfaced as an error instead of corrupting state.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("activation: illegal transition %v -> %v", e.From, e.To)
}
