package grain

import "context"

// Grain is what a grain kind implements: a handler that runs one message per
// turn. The runtime never runs two turns of one activation at once (unless the
// kind is registered as reentrant), so Receive may use the grain's fields
// without a lock. Implement it on a pointer type (Receive on *Cart, a
// factory returning &Cart{}): with a value receiver each turn changes a
// copy, and the grain forgets its work (Go compiles it; staticcheck reports
// a field assigned and never read there).
//
// The reply is returned: for an ask it goes to the caller, for a tell it is
// dropped. A non-nil error goes to the caller as it is — but for a typed nil,
// a nil pointer returned in an error, which the caller gets as an error
// matching ErrTypedNil, naming its type. A panic is recovered and reaches the
// caller as a *PanicError.
//
// ctx is cancelled when the caller of an ask gives up (its ctx is cancelled or
// its deadline passes) and when the silo closes. Pass it on to Call and Tell
// made from the turn: it carries the call chain the runtime uses to detect
// call cycles and to let the partition serve other grains while this turn
// waits.
//
// ctx and c belong to the turn: do not keep them, or use them from another
// goroutine, once Receive has returned. The runtime reuses them for later
// turns (that is what keeps a tell free of allocations), as Akka's actor
// context and protoactor's are. Work that outlives the turn takes what it
// needs first — the grain's ID from c.ID(), the runtime from c.Silo() —
// uses a context of its own, and hands its result back to the grain as a
// message (see the silo package's pipe-to-self example).
type Grain interface {
	Receive(ctx context.Context, c *Context, msg any) (reply any, err error)
}

// Func adapts a function to the Grain interface, for grains that keep their
// state in a closure.
type Func func(ctx context.Context, c *Context, msg any) (any, error)

// Receive calls f.
func (f Func) Receive(ctx context.Context, c *Context, msg any) (any, error) { return f(ctx, c, msg) }

// Activator is implemented by grains that need to run code when activated,
// before any message: load state, start timers. An error or panic fails the
// activation: every message waiting for it fails, and the next message tries
// a fresh activation — at once the first time; an activation that keeps
// failing is retried with backoff, and then refused for a while, under the
// kind's supervision limits (messages meanwhile fail with its error). The
// silo bounds it (silo.Config.ActivationTimeout): one that does not return
// in time fails the same way, its ctx ended (DeadlineExceeded) — and its
// instance is dropped when it returns, with no OnDeactivate: a hook that
// acquires what only it can let go (a file, a goroutine) lets it go itself
// if it finds its ctx ended as it returns. ctx is the activation's, not
// the first message's: it carries the first caller's values (a tell's, those
// the silo's ContextPropagator carried), but does not
// end when that caller gives up, since the messages queued behind it wait
// for the same activation.
type Activator interface {
	OnActivate(ctx context.Context, c *Context) error
}

// Deactivator is implemented by grains that need to run code when
// deactivated (idle, evicted, stopped or at shutdown) — and when an
// instance is replaced after a failure (supervision's restart): then
// c.DeactivationReason() is DeactivationFailed, the state is suspect and
// should not be saved, but what the instance holds should be released. It
// runs as the instance's last turn, bounded by the silo's deactivation
// timeout through ctx. An error or panic is logged, and deactivation (or
// the restart) completes anyway. At a silo's
// shutdown, messages it sends to other grains are refused (ErrSiloClosed):
// save state to storage here, not through another grain. Tells to observers
// still arrive: a goodbye to the grain's clients is fine. Do not rely on it
// for durability: a process crash skips it.
type Deactivator interface {
	OnDeactivate(ctx context.Context, c *Context) error
}

// Caller is anything that can send a request to a grain and wait for its
// reply: a silo, or a test double. It is the one method silo.Call needs.
type Caller interface {
	Ask(ctx context.Context, id ID, msg any) (any, error)
}

// Teller is anything that can send a one-way message to a grain.
type Teller interface {
	Tell(ctx context.Context, id ID, msg any) error
}

// CallerFunc adapts a function to Caller: a test double for silo.Call.
type CallerFunc func(ctx context.Context, id ID, msg any) (any, error)

// Ask calls f.
func (f CallerFunc) Ask(ctx context.Context, id ID, msg any) (any, error) { return f(ctx, id, msg) }

// TellerFunc adapts a function to Teller: a test double for
// Observers.Notify.
type TellerFunc func(ctx context.Context, id ID, msg any) error

// Tell calls f.
func (f TellerFunc) Tell(ctx context.Context, id ID, msg any) error { return f(ctx, id, msg) }

// Runtime is what a grain reaches its silo through: sends to other grains.
type Runtime interface {
	Caller
	Teller
}
