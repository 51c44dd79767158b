package grain

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Match them with errors.Is; the typed errors below wrap them
// where a caller needs more detail.
var (
	// ErrSiloClosed: the silo is not started, is shutting down, or has shut down.
	ErrSiloClosed = errors.New("granary: silo closed")
	// ErrEmptyKind: an ID has no kind.
	ErrEmptyKind = errors.New("granary: empty grain kind")
	// ErrInvalidKind: a kind contains '/' or '#'.
	ErrInvalidKind = errors.New("granary: invalid grain kind")
	// ErrEmptyKey: an ID has an empty string key.
	ErrEmptyKey = errors.New("granary: empty grain key")
	// ErrInvalidID: text that does not parse as an ID.
	ErrInvalidID = errors.New("granary: invalid grain id")
	// ErrUnknownKind: no grain kind of that name is registered with the silo.
	ErrUnknownKind = errors.New("granary: unknown grain kind")
	// ErrNilContext: a nil context.Context was passed. Nothing is done.
	ErrNilContext = errors.New("granary: nil context")
	// ErrNilMessage: a nil message was sent. Nothing is enqueued.
	ErrNilMessage = errors.New("granary: nil message")
	// ErrWrongReplyType: the reply of a typed call is not of the type asked for.
	ErrWrongReplyType = errors.New("granary: wrong reply type")
	// ErrPanic: a turn or hook panicked; the *PanicError carries the value.
	ErrPanic = errors.New("granary: grain panicked")
	// ErrActivation: the grain could not be activated; see *ActivationError.
	ErrActivation = errors.New("granary: activation failed")
	// ErrGrainStopped: the grain was stopped by its supervision policy and is
	// quarantined, or stopped while the message waited.
	ErrGrainStopped = errors.New("granary: grain stopped")
	// ErrOverloaded: the grain's backlog is full.
	ErrOverloaded = errors.New("granary: grain overloaded")
	// ErrDeadLetter: the message could not be delivered; see *DeadLetterError.
	ErrDeadLetter = errors.New("granary: message not delivered")
	// ErrCallCycle: the call would wait on a grain already waiting in the same
	// call chain, or would close a cycle of grains whose turns, on different
	// chains, each wait for the next (a deadlock); see *CallCycleError.
	ErrCallCycle = errors.New("granary: call cycle")
	// ErrCallTooDeep: the call would make its call chain longer than the
	// silo allows (silo.Config.MaxCallDepth): runaway recursion through
	// grains, most likely.
	ErrCallTooDeep = errors.New("granary: call chain too deep")
	// ErrDeactivating: the grain is deactivating — a timer started from
	// OnDeactivate, which would never fire.
	ErrDeactivating = errors.New("granary: grain is deactivating")
	// ErrTimeout: a call's deadline passed before the reply came. A
	// *TimeoutError also matches context.DeadlineExceeded, whether the
	// deadline was the caller's ctx's or the silo's default call timeout.
	ErrTimeout = errors.New("granary: call timed out")
	// ErrAlreadyRegistered: a kind of that name is already registered.
	ErrAlreadyRegistered = errors.New("granary: kind already registered")
	// ErrAlreadyStarted: the operation is only allowed before Start.
	ErrAlreadyStarted = errors.New("granary: silo already started")
	// ErrInvalidConfig: a configuration value is out of range.
	ErrInvalidConfig = errors.New("granary: invalid config")
	// ErrObserverClosed: the observer a message was sent to has been closed
	// (Observer.Close in package silo, or its silo stopped): no one
	// receives at that address any more. A subscriber list drops it
	// (Observers.Notify).
	ErrObserverClosed = errors.New("granary: observer closed")
	// ErrObserverAsk: an ask to an observer, which takes one-way messages
	// only. Nothing is sent.
	ErrObserverAsk = errors.New("granary: an observer takes tells, not asks")
	// ErrNilTeller: Observers.Notify was given no Teller to tell with.
	// Nothing is sent.
	ErrNilTeller = errors.New("granary: nil Teller")
	// ErrNilObservers: Subscribe on a nil *Observers, which has nowhere to
	// keep the subscriber.
	ErrNilObservers = errors.New("granary: nil *Observers")
	// ErrRemote: the directory placed the grain on another silo, which this
	// build cannot reach.
	ErrRemote = errors.New("granary: grain is on another silo")
	// ErrNextOutsideTurn: a Filter's next was called outside the turn it
	// was given for — after Intercept returned, from a goroutine it
	// started, say, while the worker was idle or inside another turn's
	// grain. Nothing runs: the grain is not entered outside its turn.
	ErrNextOutsideTurn = errors.New("granary: a filter's next called outside its turn")
	// ErrContextAfterTurn: a checked Context (Context.Check; silo's
	// Config.CheckContexts, on in silotest.Start) was used after its turn
	// had ended — by a goroutine the handler started, say. It is what the
	// panic's *ContextAfterTurnError matches.
	ErrContextAfterTurn = errors.New("granary: a grain.Context used after its turn")
	// ErrTypedNil: a grain's handler, hook or filter returned a nil
	// pointer — or another nil value of a concrete type — as its error:
	// `var err *MyError; return reply, err`. An error interface holding
	// one is not nil, so it is no success, and its methods would most
	// likely fail on the nil receiver if anyone matched it (errors.Is and
	// errors.As call them). The turn fails with this error in its place,
	// naming the type: the caller gets it, and supervision sees a returned
	// error (Resume by default). Return a nil error for success.
	ErrTypedNil = errors.New("granary: typed nil error")
	// ErrForeignContext: a call made from a grain's turn with a ctx that
	// is not the turn's (context.Background(), a ctx kept from elsewhere),
	// refused where the silo checks for it (silo's Config.CheckContexts,
	// on in silotest.Start). Such a call carries no call chain, so a cycle
	// through it — the grain calling itself, or a grain that calls back —
	// cannot be seen and waits for the call's timeout, and it is not
	// cancelled with the turn. Pass the turn's ctx on, or a ctx made from
	// it (context.WithoutCancel(ctx) for a call that outlives the turn).
	ErrForeignContext = errors.New("granary: a call from a grain's turn with a ctx that is not the turn's")
	// ErrInvalidReason: a Reason or DeactivationReason that names none of
	// the defined ones, as text (UnmarshalText) or as a value (MarshalText).
	ErrInvalidReason = errors.New("granary: invalid reason")
)

// IDError reports an ID that cannot address a grain.
type IDError struct {
	ID  ID
	Err error // ErrEmptyKind, ErrInvalidKind, ErrEmptyKey or ErrInvalidID
}

func (e *IDError) Error() string {
	if e.ID.IsZero() {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v: kind %q key %q", e.Err, e.ID.kind, e.ID.Key())
}
func (e *IDError) Unwrap() error { return e.Err }

// ActivationError is what a caller gets when the grain's activation failed:
// its factory or OnActivate returned an error or panicked. It matches
// ErrActivation and unwraps to the cause.
type ActivationError struct {
	ID  ID
	Err error
}

func (e *ActivationError) Error() string {
	return fmt.Sprintf("granary: activating %v: %v", e.ID, e.Err)
}
func (e *ActivationError) Unwrap() []error { return []error{ErrActivation, e.Err} }

// ReplyTypeError is what a typed call returns when the grain replied with a
// value of another type. It matches ErrWrongReplyType.
type ReplyTypeError struct {
	ID   ID
	Want string // the type asked for
	Got  string // the type of the reply
}

func (e *ReplyTypeError) Error() string {
	return fmt.Sprintf("granary: reply from %v is %s, want %s", e.ID, e.Got, e.Want)
}
func (e *ReplyTypeError) Is(target error) bool { return target == ErrWrongReplyType }

// DeadLetterError is what an ask gets when its message became a dead letter.
// It matches ErrDeadLetter, and the sentinel of its reason (ErrGrainStopped,
// ErrOverloaded, ErrSiloClosed, ...).
type DeadLetterError struct {
	ID     ID
	Reason Reason
	Err    error // the cause, if any (for example the activation error)
}

func (e *DeadLetterError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("granary: message to %v not delivered (%v): %v", e.ID, e.Reason, e.Err)
	}
	return fmt.Sprintf("granary: message to %v not delivered (%v)", e.ID, e.Reason)
}

func (e *DeadLetterError) Unwrap() []error {
	errs := []error{ErrDeadLetter}
	if s := e.Reason.sentinel(); s != nil {
		errs = append(errs, s)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// CallCycleError reports a call that would deadlock: its target is already
// waiting in the call chain, or waits, through other grains' calls on other
// chains, for the caller. Chain lists the grains in call order, ending with
// the one the cycle comes back to. It matches ErrCallCycle. (For a cycle
// across chains it arrives inside a *DeadLetterError with reason deadlock:
// the ask had been sent.)
type CallCycleError struct {
	Chain []ID
	// Silos, for a chain through more than one silo, names the silo each
	// grain of Chain waits in (its Config.Name; a second silo of a name
	// already given is "name#2", a third "name#3"): two silos in one
	// process each host a grain of every ID, and a chain through both can
	// name one ID twice. Nil when every grain of Chain is in one silo.
	Silos []string
}

func (e *CallCycleError) Error() string {
	parts := make([]string, len(e.Chain))
	for i, id := range e.Chain {
		parts[i] = id.String()
		if len(e.Silos) == len(e.Chain) {
			parts[i] += " (silo " + e.Silos[i] + ")"
		}
	}
	return "granary: call cycle: " + strings.Join(parts, " -> ")
}
func (e *CallCycleError) Is(target error) bool { return target == ErrCallCycle }

// TimeoutError is what a call returns when no reply came in time. It matches
// ErrTimeout and context.DeadlineExceeded (its Cause is, or wraps, that). A
// timed-out call is never resent: the grain handles the message at most once.
type TimeoutError struct {
	ID    ID
	Cause error // context.DeadlineExceeded, or the silo's default call timeout wrapping it
	// ForeignContext: the call was made from a grain's turn with a ctx
	// that is not the turn's (see ErrForeignContext), so the silo could
	// not see whether it waited on its own caller — the likeliest reason
	// it timed out. The error's text says so.
	ForeignContext bool
}

func (e *TimeoutError) Error() string {
	if e.ForeignContext {
		return fmt.Sprintf("granary: call to %v timed out: %v (it was made from a grain's turn with a ctx that is not the turn's, so a cycle through it could not be seen: pass the turn's ctx on)", e.ID, e.Cause)
	}
	return fmt.Sprintf("granary: call to %v timed out: %v", e.ID, e.Cause)
}
func (e *TimeoutError) Unwrap() []error { return []error{ErrTimeout, e.Cause} }
func (e *TimeoutError) Timeout() bool   { return true }

// ContextAfterTurnError is what a checked Context panics with when used
// after its turn (Context.Check): the grain the turn was of, and the
// method called. An unchecked Context — a silo's by default — does not
// look: used after its turn it reads whatever turn its worker runs next.
type ContextAfterTurnError struct {
	ID     ID
	Method string
}

func (e *ContextAfterTurnError) Error() string {
	return fmt.Sprintf("%v: %s() on the Context of a turn of %v that had ended; copy what work that outlives the turn needs (gc.ID(), gc.Sender()) before it starts", ErrContextAfterTurn, e.Method, e.ID)
}

// Unwrap returns ErrContextAfterTurn.
func (e *ContextAfterTurnError) Unwrap() error { return ErrContextAfterTurn }
