package silo

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/grain"
)

// timerRefusal is why an activation's StartTimer is refused: its timers
// would never fire, and saying so beats a nil that goes nowhere. Set by
// the owner under actExtra.mu, read by the turn's StartTimer.
type timerRefusal uint8

const (
	refuseNone timerRefusal = iota
	// OnDeactivate runs, or ran: the timers stop with the instance.
	refuseDeactivating
	// The silo gave up on the OnActivate that runs (it overran
	// Config.ActivationTimeout): the activation failed, and what the hook
	// does now is dropped (acttimeout.go).
	refuseGivenUp
	// The silo closed, or stopped, while the turn ran: no timer runs any
	// more (Silo.baseEnded), and an OnActivate running on past a Close has
	// its first message made a dead letter (closeActivations).
	refuseClosed
)

// err is the error StartTimer returns for the timer named name.
func (r timerRefusal) err(name string) error {
	switch r {
	case refuseGivenUp:
		return fmt.Errorf("%w: timer %q started by an OnActivate the silo gave up on would never fire: %w",
			grain.ErrActivation, name, context.DeadlineExceeded)
	case refuseClosed:
		return fmt.Errorf("%w: timer %q started as its silo stopped would never fire", grain.ErrSiloClosed, name)
	default:
		return fmt.Errorf("%w: timer %q started in OnDeactivate would never fire", grain.ErrDeactivating, name)
	}
}

// refuseTimers makes a's StartTimer return why's error from now on. Owner
// only, where it gives up on a's OnActivate; a is out of the directory,
// never to run again, so nothing resets it.
func refuseTimers(a *act, why timerRefusal) {
	x := a.extra()
	x.mu.Lock()
	x.refuse = why
	x.mu.Unlock()
}
