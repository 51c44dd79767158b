package activation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/nilness"
)

// Directive is what a failure does to an activation.
type Directive uint8

// The directives, in the style of Akka and Erlang supervisors.
const (
	// Restart drops the instance, builds a fresh one from the factory, runs
	// OnActivate again, then goes on with the queued messages in order.
	Restart Directive = iota
	// Resume keeps the instance and its state and goes on with the next message.
	Resume
	// Stop deactivates the grain: queued messages become dead letters and the
	// grain is quarantined.
	Stop
)

func (d Directive) String() string {
	switch d {
	case Restart:
		return "restart"
	case Resume:
		return "resume"
	case Stop:
		return "stop"
	}
	return fmt.Sprintf("directive(%d)", d)
}

// Decider chooses the directive for a failed turn. err is the turn's error:
// a *grain.PanicError for a panic, else what the handler returned. Returning
// Resume for an error means it is not a failure at all: the caller gets it and
// nothing else happens. A runtime calls it from its own goroutines, one
// failure at a time per grain. The silo calls it in the failed turn, before
// the turn ends: one that blocks (that calls a grain to report the failure,
// say) is handed off as a blocking handler is, and holds up no other
// grain — but the failed turn's caller waits for it, so it should be quick.
// The silo recovers a Decider that panics or calls runtime.Goexit, or
// returns a Directive that is none of Restart, Resume and Stop, logs it,
// and applies DefaultDecider instead.
//
// A Decider that does more than look at the error — calls a grain, logs
// with the caller's trace, stops the silo — implements ContextDecider, and
// is given the turn's ctx. Without it, a call from the Decider is not part
// of the turn's call chain (one back to the failed grain waits out its
// timeout instead of failing with ErrCallCycle), and Shutdown called in it
// waits for the turn the Decider runs in — for ever, with a ctx that never
// ends.
type Decider interface {
	Decide(id grain.ID, err error) Directive
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(id grain.ID, err error) Directive

// Decide calls f.
func (f DeciderFunc) Decide(id grain.ID, err error) Directive { return f(id, err) }

// ContextDecider is a Decider that is also given the ctx of the failed
// turn: the handler's, with the caller's values and deadline, and the turn
// itself, so that what it does is the turn's doing — a call it makes
// extends the turn's call chain (a cycle back to the failed grain fails at
// once with ErrCallCycle), and a silo's Shutdown called with it begins and
// returns ErrShutdownFromTurn, as from a handler, instead of waiting for
// the turn it is in. ctx ends as the turn's does: when the caller gives up
// on an ask, or the silo closes. A runtime that has a turn calls
// DecideContext, never Decide.
type ContextDecider interface {
	Decider
	DecideContext(ctx context.Context, id grain.ID, err error) Directive
}

// ContextDeciderFunc adapts a function to ContextDecider.
type ContextDeciderFunc func(ctx context.Context, id grain.ID, err error) Directive

// DecideContext calls f.
func (f ContextDeciderFunc) DecideContext(ctx context.Context, id grain.ID, err error) Directive {
	return f(ctx, id, err)
}

// Decide calls f with a ctx that carries nothing and never ends: for a
// caller that has no turn to give it (Supervision.Decide).
func (f ContextDeciderFunc) Decide(id grain.ID, err error) Directive {
	return f(context.Background(), id, err)
}

// DefaultDecider restarts on a panic of the grain's own turn and resumes
// on a returned error: an error is an answer, a panic means the state may
// be broken. A grain that returns the error of a call whose grain panicked
// — the *grain.PanicError of another grain, wrapped or not — resumes: the
// panic was the other grain's, and its own state is whole (restarting it
// would lose that state to a fault elsewhere, up every grain of the call
// chain that passed the error on). See OwnPanic.
func DefaultDecider(id grain.ID, err error) Directive {
	if OwnPanic(id, err) {
		return Restart
	}
	return Resume
}

// OwnPanic reports whether err holds the panic of grain id's own turn —
// its handler's, a filter's around it, a runtime.Goexit in it — rather
// than that of a grain it called and whose error it returned: the first
// *grain.PanicError in err's tree names id, or no grain. For the zero id (a
// Decider that does not say whose turn failed) any panic counts.
//
// An error whose own methods panic as errors.As walks its tree — an Unwrap
// of the program's that fails on some value — holds no panic of a turn's:
// OwnPanic reports false rather than let the panic reach the goroutine that
// asked, a partition's (a Decider is asked on it).
func OwnPanic(id grain.ID, err error) (own bool) {
	defer func() {
		if recover() != nil {
			own = false
		}
	}()
	var pe *grain.PanicError
	if !errors.As(err, &pe) {
		return false
	}
	return id.IsZero() || pe.ID.IsZero() || pe.ID == id
}

// Defaults for Supervision's zero fields.
const (
	DefaultMaxRestarts = 10
	DefaultWindow      = 10 * time.Second
	DefaultMinBackoff  = 10 * time.Millisecond
	DefaultMaxBackoff  = time.Second
	DefaultQuarantine  = 5 * time.Second
)

// Supervision is a kind's failure policy. Zero fields take the defaults
// above; a negative MaxRestarts means no restart is allowed (the first
// restart stops the grain).
type Supervision struct {
	// Decider chooses the directive; nil means DefaultDecider. A typed nil
	// — a nil DeciderFunc, a nil pointer — is refused by Validate: it would
	// panic at every failure.
	Decider Decider
	// MaxRestarts restarts are allowed within Window; one more stops the
	// grain (Erlang's intensity and period).
	MaxRestarts int
	Window      time.Duration
	// The first restart in a window is immediate; the k-th waits
	// MinBackoff * 2^(k-2), at most MaxBackoff.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Quarantine is how long a stopped grain refuses messages before the
	// next message may activate it afresh.
	Quarantine time.Duration
}

// WithDefaults returns s with zero fields set to their defaults.
func (s Supervision) WithDefaults() Supervision {
	if s.Decider == nil {
		s.Decider = DeciderFunc(DefaultDecider)
	}
	if s.MaxRestarts == 0 {
		s.MaxRestarts = DefaultMaxRestarts
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.MinBackoff == 0 {
		s.MinBackoff = DefaultMinBackoff
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = DefaultMaxBackoff
	}
	if s.Quarantine == 0 {
		s.Quarantine = DefaultQuarantine
	}
	return s
}

// Validate reports a policy that cannot work.
func (s Supervision) Validate() error {
	switch {
	case s.Window < 0, s.MinBackoff < 0, s.MaxBackoff < 0, s.Quarantine < 0:
		return fmt.Errorf("%w: negative supervision duration", grain.ErrInvalidConfig)
	case s.MaxBackoff != 0 && s.MinBackoff > s.MaxBackoff:
		return fmt.Errorf("%w: supervision MinBackoff %v > MaxBackoff %v", grain.ErrInvalidConfig, s.MinBackoff, s.MaxBackoff)
	case s.Decider != nil && nilness.Of(s.Decider):
		return fmt.Errorf("%w: supervision Decider = a nil %T", grain.ErrInvalidConfig, s.Decider)
	}
	return nil
}

// Restarts is an activation's restart history: the times of its recent
// restarts. The zero value has none and costs one pointer, since most grains
// never restart.
type Restarts struct {
	h *restartHistory
}

type restartHistory struct{ at []time.Duration }

// Count returns how many restarts are in the history (none in a nil one).
func (r *Restarts) Count() int {
	if r == nil || r.h == nil {
		return 0
	}
	return len(r.h.at)
}

// Decide applies the policy s, its zero fields taking their defaults, to a
// failed turn at time now: it returns the directive and, for Restart, how
// long to back off first. A Restart past the limit becomes Stop. Restarts
// that happen are recorded in r (a nil r keeps no history).
func (s Supervision) Decide(r *Restarts, id grain.ID, err error, now time.Duration) (Directive, time.Duration) {
	s = s.WithDefaults()
	d := s.Decider.Decide(id, err)
	if d != Restart {
		return d, 0
	}
	return s.restart(r, now)
}

// Restart is Decide once the Decider has chosen Restart: it applies the
// restart limit and the backoff to the history r. A runtime that keeps r
// only for grains that have restarted calls the Decider, then Restart.
// Zero fields of s take their defaults; a nil r keeps no history.
func (s Supervision) Restart(r *Restarts, now time.Duration) (Directive, time.Duration) {
	return s.WithDefaults().restart(r, now)
}

// restart is Restart on a policy whose defaults are set.
func (s Supervision) restart(r *Restarts, now time.Duration) (Directive, time.Duration) {
	if r == nil {
		r = &Restarts{}
	}
	if r.h == nil {
		r.h = &restartHistory{}
	}
	h := r.h
	// forget restarts older than the window
	keep := h.at[:0]
	for _, t := range h.at {
		if now-t < s.Window {
			keep = append(keep, t)
		}
	}
	h.at = keep
	if s.MaxRestarts < 0 || len(h.at) >= s.MaxRestarts {
		return Stop, 0
	}
	h.at = append(h.at, now)
	k := len(h.at)
	if k == 1 {
		return Restart, 0
	}
	b := s.MinBackoff
	for i := 2; i < k && b < s.MaxBackoff; i++ {
		if b > s.MaxBackoff/2 { // doubling would pass it, or overflow into a negative backoff
			b = s.MaxBackoff
			break
		}
		b *= 2
	}
	return Restart, min(b, s.MaxBackoff)
}
