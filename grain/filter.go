package grain

import "context"

// Filter runs around a grain's message turns, as Orleans' incoming grain
// call filters and protoactor's inbound middleware do: for logging,
// metrics, tracing, authorization. Intercept gets what the grain's Receive
// would — the turn's ctx, its Context and the message — and next, the rest
// of the turn: the filters after this one, then the grain. It goes on with
// next.Receive, with the same arguments or others (a ctx derived from the
// turn's, carrying a span, say — never one that is not: the turn's ctx
// carries its call chain — or a message rewritten), or returns without
// calling it to refuse the message. What Intercept returns is the turn's
// outcome: the reply an ask gets.
//
// A filter runs inside the turn, on the turn's goroutine, so what it does
// counts as the grain's turn: a panic in it is the turn's panic (the kind's
// supervision decides), a Call from it is a call of the grain, and the
// grain runs no other turn meanwhile. Filters run for every message turn —
// an activation's first message and a timer's ticks included — and not for
// OnActivate or OnDeactivate. next, like ctx and c, belongs to the turn:
// call it before Intercept returns, from the turn's goroutine (more than
// once if need be: again after recovering a panic of the grain's, to
// retry). A silo refuses a call of next after the turn ended, or while
// another turn is inside its grain, with ErrNextOutsideTurn, entering no
// grain.
//
// A Filter is shared by every grain it is registered for and runs on many
// partitions at once: it must be safe for concurrent use.
type Filter interface {
	Intercept(ctx context.Context, c *Context, msg any, next Grain) (reply any, err error)
}

// FilterFunc adapts a function to the Filter interface.
type FilterFunc func(ctx context.Context, c *Context, msg any, next Grain) (any, error)

// Intercept calls f.
func (f FilterFunc) Intercept(ctx context.Context, c *Context, msg any, next Grain) (any, error) {
	return f(ctx, c, msg, next)
}
