package grain

import "context"

// Send is a message on its way out of its sender, as a SendFilter sees it.
type Send struct {
	// From is the grain whose turn sends it (the sender a Tell's handler
	// sees, Context.Sender); the zero ID for code outside any grain.
	From ID
	// To is the target, Msg the message.
	To  ID
	Msg any
	// Ask is true for a request whose reply the sender waits for (Ask,
	// silo.Call), false for a one-way Tell.
	Ask bool
}

// SendNext is the rest of a send after a SendFilter: the filters after it,
// then the runtime's send itself, of s.To and s.Msg — a Tell or an Ask as
// the sender called, whatever s.Ask and s.From say. It returns an ask's
// reply (nil for a tell) and the send's error.
type SendNext func(ctx context.Context, s Send) (reply any, err error)

// SendFilter runs on the sender's side around every message sent through
// a runtime's filtered view — with a silo, every Tell and Ask a grain makes
// through its Context's Silo() (silo.Call and Observers.Notify given it
// too), and every one code outside makes through Silo.Runtime() — as
// Orleans' outgoing grain call filters and protoactor's sender middleware
// do: to time calls as their callers see them (the wait for the grain
// included, which a Filter around the turn does not see), count or log
// them, add to the ctx an ask's handler runs under (a tell's handler runs
// under none of its sender's ctx, but what a silo's ContextPropagator
// extracts from the ctx the filter passes on reaches it: a trace begun in
// a filter), or refuse a send. Send
// gets the sender's ctx and the message, and goes on with next — with the
// same arguments or others (a ctx derived from the sender's, carrying a
// value; a message rewritten) — or returns without calling it, to refuse
// the send: nothing is sent then, so it is no dead letter, and the sender
// gets Send's error. What Send returns is what the sender's Tell or Ask
// returns.
//
// A SendFilter runs on the sender's goroutine — in a turn, as part of it
// — and a send it makes through the filtered view goes through the
// filters again (the silo's own Tell and Ask do not). A panic in one fails
// the send with a *PanicError (the sender's Tell or Ask returns it) rather
// than reach the sender. It is shared by every sender, on many goroutines
// at once: it must be safe for concurrent use.
type SendFilter interface {
	Send(ctx context.Context, s Send, next SendNext) (reply any, err error)
}

// SendFilterFunc adapts a function to the SendFilter interface.
type SendFilterFunc func(ctx context.Context, s Send, next SendNext) (any, error)

// Send calls f.
func (f SendFilterFunc) Send(ctx context.Context, s Send, next SendNext) (any, error) {
	return f(ctx, s, next)
}
