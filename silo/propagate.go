package silo

import (
	"context"
	"errors"
	"log/slog"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/nilness"
	"github.com/granary-go/granary/queues"
)

// ContextPropagator carries what a program keeps in a ctx — a trace's span,
// a tenant, a request id — from a Tell to the turn that handles it, as
// Orleans' RequestContext and protoactor's propagators do. (An ask's handler
// runs under its caller's ctx already, values and all.) Set it as
// Config.Propagator; by default a tell's handler sees none of its sender's
// values.
//
// Extract runs in Tell, on the sender's goroutine: what it returns travels
// with the message (and into the OnActivate of a grain the tell activates) — nil carries nothing, and costs nothing — and must not
// change afterwards. Inject runs in the turn, before the kind's filters, so
// they see its ctx too: it returns the handler's ctx, derived from the one
// it is given (the turn's, whose cancellation and values the silo needs).
// Both run concurrently for many messages: they must be safe for
// concurrent use. An Extract that panics carries nothing (the panic is
// logged); an Inject that panics or returns nil fails the turn, as the
// handler would.
//
// A message whose Tell carried something is a *queues.Carrying on its way;
// the wire form encodes what it carries as it encodes a message, so a
// transport between silos keeps it too.
type ContextPropagator interface {
	Extract(ctx context.Context) any
	Inject(ctx context.Context, carried any) context.Context
}

// PropagatorFuncs adapts two functions to ContextPropagator. New refuses
// one with either left nil.
type PropagatorFuncs struct {
	ExtractFunc func(ctx context.Context) any
	InjectFunc  func(ctx context.Context, carried any) context.Context
}

// Extract calls f.ExtractFunc.
func (f PropagatorFuncs) Extract(ctx context.Context) any { return f.ExtractFunc(ctx) }

// Inject calls f.InjectFunc.
func (f PropagatorFuncs) Inject(ctx context.Context, carried any) context.Context {
	return f.InjectFunc(ctx, carried)
}

// validPropagator reports whether p can be called: not a typed nil, and not
// PropagatorFuncs missing a function.
func validPropagator(p ContextPropagator) bool {
	switch f := p.(type) {
	case nil:
		return true
	case PropagatorFuncs:
		return f.ExtractFunc != nil && f.InjectFunc != nil
	case *PropagatorFuncs:
		return f != nil && f.ExtractFunc != nil && f.InjectFunc != nil
	}
	return !nilness.Of(p)
}

// carry wraps msg with what the propagator extracts from ctx, if anything.
// Called by Tell when Config.Propagator is set.
func (s *Silo) carry(ctx context.Context, msg any) any {
	carried := s.extract(ctx)
	if carried == nil {
		return msg
	}
	return &queues.Carrying{Msg: msg, Carried: carried}
}

// extract calls the propagator's Extract: program code, on the sender's
// goroutine, whose panic must not become the sender's.
func (s *Silo) extract(ctx context.Context) (carried any) {
	defer func() {
		if r := recover(); r != nil {
			carried = nil
			s.log(slog.LevelError, "granary: ContextPropagator.Extract panicked; the message carries nothing", "panic", r)
		}
	}()
	return s.cfg.Propagator.Extract(ctx)
}

// errNilInject fails a turn whose propagator's Inject returned a nil ctx.
var errNilInject = errors.New("granary: ContextPropagator.Inject returned a nil context")

// run runs the turn of msg through the kind's filters and the grain. A
// message that carries its sender's ctx values (a *queues.Carrying) runs
// under the ctx the silo's propagator injects them into: one type check a
// message, on a word loaded anyway.
func (w *worker) run(tc context.Context, a *act, msg any) (any, error) {
	if c, ok := msg.(*queues.Carrying); ok {
		return w.runCarrying(tc, a, c)
	}
	return activation.Run(tc, w.receiver(a), w.cur, msg)
}

func (w *worker) runCarrying(tc context.Context, a *act, c *queues.Carrying) (any, error) {
	pr := w.p.s.cfg.Propagator
	if pr == nil { // a frame from a silo that propagates, to one that does not
		return activation.Run(tc, w.receiver(a), w.cur, c.Msg)
	}
	inj := w.inject
	if inj == nil {
		inj = &injector{}
		w.inject = inj
	}
	inj.pr, inj.carried, inj.next = pr, c.Carried, w.receiver(a)
	defer inj.clear()
	return activation.Run(tc, inj, w.cur, c.Msg)
}

// hookValues returns the ctx a grain's OnActivate runs under when the tell
// that activates it carries its sender's values: the one the propagator
// injects them into, as for the handler after it — a trace's span covers
// the state's load as it would for an ask's, whose hook has its caller's
// values. Inject panicking or returning nil fails the activation, as it
// would fail the turn.
func (w *worker) hookValues(tc context.Context, first any) (ctx context.Context, err error) {
	c, ok := first.(*queues.Carrying)
	pr := w.p.s.cfg.Propagator
	if !ok || pr == nil {
		return tc, nil
	}
	defer func() {
		if v := recover(); v != nil {
			ctx, err = nil, grain.Recovered(w.cur.ID(), v)
		}
	}()
	if ctx = pr.Inject(tc, c.Carried); ctx == nil {
		return nil, errNilInject
	}
	return ctx, nil
}

// injector is the outermost layer of a turn whose message carries
// something: it injects that into the turn's ctx, inside the turn (a panic
// in Inject is the turn's), and passes the turn on. One lives in each
// worker that ran such a turn.
type injector struct {
	pr      ContextPropagator
	carried any
	next    grain.Grain
}

func (i *injector) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	ictx := i.pr.Inject(ctx, i.carried)
	if ictx == nil {
		return nil, errNilInject
	}
	return i.next.Receive(ictx, gc, msg)
}

// clear lets go of the turn's grain and what it carried.
func (i *injector) clear() { i.carried, i.next = nil, nil }
