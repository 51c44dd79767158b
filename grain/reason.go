package grain

// Reason says why a message became a dead letter.
type Reason uint8

// The reasons a message can become a dead letter.
const (
	ReasonUnknown          Reason = iota
	ReasonStopped                 // the grain was stopped (silo.Stop, or its supervision policy) with the message sent before
	ReasonQuarantined             // the grain is quarantined after its supervision policy stopped it
	ReasonActivationFailed        // the activation the message waited for failed
	ReasonShutdown                // the silo shut down or closed before the message was handled
	ReasonOverload                // the grain's backlog was full
	ReasonDeactivated             // the grain deactivated before it could handle the message and it could not be forwarded; a single silo forwards every such message to the grain's next activation, so only a silo that cannot (a remote one gone) reports it
	ReasonExpired                 // an ask whose caller gave up (its ctx ended, or the call timed out) before its turn began
	ReasonDeadlock                // an ask that would have waited for ever: its target waits, through other grains' calls, for the ask's own caller
	ReasonObserverClosed          // a tell to an observer closed before it was received, or sent after
	numReasons
)

// NumReasons is the number of defined reasons, for tables indexed by Reason.
const NumReasons = int(numReasons)

var reasonNames = [...]string{
	ReasonUnknown:          "unknown",
	ReasonStopped:          "stopped",
	ReasonQuarantined:      "quarantined",
	ReasonActivationFailed: "activation failed",
	ReasonShutdown:         "shutdown",
	ReasonOverload:         "overload",
	ReasonDeactivated:      "deactivated",
	ReasonExpired:          "expired",
	ReasonDeadlock:         "deadlock",
	ReasonObserverClosed:   "observer closed",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

func (r Reason) sentinel() error {
	switch r {
	case ReasonStopped, ReasonQuarantined:
		return ErrGrainStopped
	case ReasonActivationFailed:
		return ErrActivation
	case ReasonShutdown:
		return ErrSiloClosed
	case ReasonOverload:
		return ErrOverloaded
	case ReasonDeadlock:
		return ErrCallCycle
	case ReasonObserverClosed:
		return ErrObserverClosed
	}
	return nil
}
