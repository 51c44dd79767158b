package grain

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Self is the handle a runtime gives a Context over the activation it belongs
// to. Runtimes implement it; grain code uses it through the Context methods.
// Test doubles can implement it to unit-test a grain without a silo.
type Self interface {
	// DeactivateOnIdle asks for the activation to be deactivated once the
	// current turn has finished.
	DeactivateOnIdle()
	// DelayDeactivation keeps the activation from idle deactivation for at
	// least d from now; d <= 0 cancels that.
	DelayDeactivation(d time.Duration)
	// StartTimer starts (or replaces) the named timer; see Context.StartTimer.
	StartTimer(name string, due, period time.Duration, msg any) error
	// StopTimer stops the named timer, if it runs.
	StopTimer(name string)
	// Now returns the silo clock's time.
	Now() time.Time
}

// Context is what one turn of a grain receives besides its message: who the
// grain is, who sent the message, the runtime to reach other grains, and
// controls over its own activation.
//
// A Context is valid only during the turn it was given to: a silo reuses
// it for the next turn its worker runs, so one kept past its turn — by a
// goroutine the handler started — reads another grain's; copy what such
// work needs (ID, Sender) before starting it. A checked Context (Check:
// silo's Config.CheckContexts, on in silotest.Start) panics instead. It is
// not safe for concurrent use. A Context with no runtime behind it — the zero Context, or
// one from NewContext with a nil Self — is safe to use in a test: ID is the
// zero ID unless set, Now is the real clock, the deactivation controls do
// nothing, and StartTimer fails with ErrSiloClosed.
type Context struct {
	id     *ID
	sender *ID // nil: not sent by a grain
	rt     Runtime
	self   Self
	// a checked Context's (Check): set by the runtime once the turn has
	// ended, after which every method panics
	over *atomic.Bool
}

// NewContext builds a Context, for tests that drive a grain's Receive
// directly with doubles for rt and self. sender is the zero ID when the
// message came from outside any grain.
func NewContext(id, sender ID, rt Runtime, self Self) Context {
	c := Context{id: &id, rt: rt, self: self}
	if !sender.IsZero() {
		c.sender = &sender
	}
	return c
}

// ContextFor builds a Context that refers to id and sender (nil when the
// message came from outside any grain) without copying them: what a runtime
// calls for every turn. Neither may change until the turn has returned.
func ContextFor(id, sender *ID, rt Runtime, self Self) Context {
	return Context{id: id, sender: sender, rt: rt, self: self}
}

// Set points c at a new turn, in place: what a runtime calls for every
// turn, like ContextFor, without building a Context to copy.
func (c *Context) Set(id, sender *ID, rt Runtime, self Self) {
	c.id = id
	c.sender = sender
	c.rt = rt
	c.self = self
}

// Check makes c a checked Context: once over is set — the runtime sets it
// when c's turn has ended — every method of c that tells of the turn or
// acts on its grain (ID, Sender, the timers and deactivation controls,
// DeactivationReason) panics with a *ContextAfterTurnError naming the
// grain and the method, instead of answering; Silo and Now, the same for
// every turn of a runtime, still answer. A runtime gives each turn a Context of its own so checked
// when asked to catch a Context kept past its turn (silo's
// Config.CheckContexts, which silotest.Start turns on); Set keeps it.
func (c *Context) Check(over *atomic.Bool) { c.over = over }

// afterTurn panics for a checked Context used after its turn.
func (c *Context) afterTurn(method string) {
	var id ID
	if c.id != nil {
		id = *c.id
	}
	panic(&ContextAfterTurnError{ID: id, Method: method})
}

// ID returns the identity of the grain running the turn.
func (c *Context) ID() ID {
	if c == nil || c.id == nil {
		return ID{}
	}
	if c.over != nil && c.over.Load() {
		c.afterTurn("ID")
	}
	return *c.id
}

// Sender returns the grain that sent the message, and false if it came from
// outside any grain of this grain's runtime (code outside, another silo's
// grain) or from a timer: a reply told to the ID reaches the sender.
func (c *Context) Sender() (ID, bool) {
	if c != nil && c.over != nil && c.over.Load() {
		c.afterTurn("Sender")
	}
	if c == nil || c.sender == nil || c.sender.IsZero() {
		return ID{}, false
	}
	return *c.sender, true
}

// Silo returns the runtime, to Tell or Call other grains (see silo.Call):
// with a silo's send filters (SendFilter), a view that runs them around
// each send.
func (c *Context) Silo() Runtime {
	if c == nil {
		return nil
	}
	return c.rt
}

// Now returns the time of the silo's clock (the real clock's, with no
// runtime behind c).
func (c *Context) Now() time.Time {
	if c == nil || c.self == nil {
		return time.Now()
	}
	return c.self.Now()
}

// DeactivateOnIdle deactivates the grain after the current turn: OnDeactivate
// runs, and the next message activates a fresh instance. Messages already
// queued are not lost; they go to that fresh instance.
func (c *Context) DeactivateOnIdle() {
	if c != nil && c.over != nil && c.over.Load() {
		c.afterTurn("DeactivateOnIdle")
	}
	if c != nil && c.self != nil {
		c.self.DeactivateOnIdle()
	}
}

// DelayDeactivation keeps the grain active for at least d from now, even if it
// receives no message (it can still be evicted by the activation limit, and is
// deactivated at shutdown). A shorter d than one asked for before does not
// shorten it; a d of zero or less cancels it (Orleans' negative span): the
// grain goes idle as usual from then on — at the next idle round, if it has
// had no message for its idle timeout (a timer's tick is none, unless its
// kind says so).
func (c *Context) DelayDeactivation(d time.Duration) {
	if c != nil && c.over != nil && c.over.Load() {
		c.afterTurn("DelayDeactivation")
	}
	if c != nil && c.self != nil {
		c.self.DelayDeactivation(d)
	}
}

// StartTimer starts the named timer: after due, and then every period if
// period > 0, msg is delivered to this grain as a turn of its own, never
// concurrent with another turn. Starting a timer with the name of a running
// one replaces it — cheaply, so putting a timer off at every message (a
// save due a minute after the last change) is fine — and no tick of the one
// replaced reaches the grain after this turn, not even one already queued
// behind it (Akka's guarantee). Timers stop when the grain deactivates or
// restarts, their queued ticks with them. A timer that would never fire
// is refused: one started from OnDeactivate with ErrDeactivating, one
// started by an OnActivate the silo gave up on (past its ActivationTimeout)
// with ErrActivation, one started as the silo closes or after it stopped
// with ErrSiloClosed. Whether ticks keep the grain
// from idle deactivation is the kind's choice (silo.WithTimerKeepAlive).
// A negative due or period, or a nil msg, is an error; a due or period of
// about 146 years or more (math.MaxInt64, say) means never: no tick, or
// none after the first.
func (c *Context) StartTimer(name string, due, period time.Duration, msg any) error {
	if c != nil && c.over != nil && c.over.Load() {
		c.afterTurn("StartTimer")
	}
	if c == nil || c.self == nil {
		return fmt.Errorf("%w: no runtime behind this Context to run timer %q", ErrSiloClosed, name)
	}
	return c.self.StartTimer(name, due, period, msg)
}

// StopTimer stops the named timer: no tick of it reaches the grain after
// this turn — not even one already queued behind the turn, nor, for a
// grain whose turns interleave, one let in while this turn waits in a call
// (as Akka's TimerScheduler.cancel guarantees). A tick running beside the
// turn runs on.
func (c *Context) StopTimer(name string) {
	if c != nil && c.over != nil && c.over.Load() {
		c.afterTurn("StopTimer")
	}
	if c != nil && c.self != nil {
		c.self.StopTimer(name)
	}
}
