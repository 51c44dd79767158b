package silo

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// What may run while a grain's turn waits in a call: everything for a
// reentrant kind, the messages its predicate lets in for a kind with
// WithMayInterleave, nothing otherwise (but calls back on the waiting turn's
// own chain, allowed per call). See docs/calls.md.

// interleaves reports whether the kind's turns let any message in while
// they wait in calls: such a turn gives the turn token up when it calls,
// and the owner looks at the grain's mailbox when it begins waiting.
func (k *kind) interleaves() bool { return k.reentrant || k.mayInterleave != nil }

// takes reports whether the kind's WithMayInterleave predicate, if it has
// one, takes msg. It is called where msg is sent — Tell, Ask, StartTimer —
// never on a silo goroutine: the predicate is the program's code. Small
// enough to inline, so a kind without one costs a send a nil check.
func (k *kind) takes(msg any) bool { return k.mayInterleave != nil && k.lets(msg) }

// lets runs the predicate; one that panics takes nothing.
func (k *kind) lets(msg any) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
			k.s.log(slog.LevelError, "granary: a WithMayInterleave predicate panicked; the message does not interleave",
				"kind", k.name, "panic", fmt.Sprint(r))
		}
	}()
	return k.mayInterleave(msg)
}

// letInMeta returns the envelope metadata of a message that its target's
// kind lets in while the grain waits: m, marked. A message from outside
// shares one Meta of the silo's; a grain's gets a copy of its sender
// metadata, which its other messages share and which must not change.
func (s *Silo) letInMeta(m *queues.Meta) *queues.Meta {
	if m == nil {
		return &s.letInMeta0
	}
	c := *m
	c.MayInterleave = true
	return &c
}

// letsIn reports whether a busy grain lets env in now: its kind lets env's
// message in (every one, for a reentrant kind), one of its turns waits in a
// call, OnActivate is not running, and it is not on its way out (see
// docs/calls.md).
func (p *partition) letsIn(a *act, env *queues.Envelope) bool {
	return (a.k.reentrant || env.Meta != nil && env.Meta.MayInterleave) && p.open(a)
}

// open reports whether a grain of an interleaving kind lets messages in now:
// one of its turns waits in a call (or in Await), OnActivate is not running, and it is not
// on its way out.
func (p *partition) open(a *act) bool {
	return a.k.interleaves() && a.waiting() > 0 && !a.wantsDeactivate() && !a.isStopping() &&
		a.State() <= activation.Active && !a.x.Load().activating.Load()
}

// Await runs wait — a blocking wait of the calling turn that is not a
// grain call: I/O, a timer, a channel — as an await point: while it runs,
// the grain lets in what its kind interleaves, as it does while the turn
// waits in a Call (every message for WithReentrant, those the predicate
// takes for WithMayInterleave, none for other kinds), and the partition
// goes on serving its other grains at once, without waiting for the
// handoff threshold. It returns wait's error.
//
// Orleans' reentrant grains interleave at every await; a Granary turn lets
// others in only where it says so, at its calls and in Await. As across a
// call, the grain's state may change while wait runs: wait must not touch
// it, and the turn reads what it needs again after. With a ctx that is not
// a turn's, Await just runs wait. A nil wait is refused with ErrNilFunc.
func Await(ctx context.Context, wait func() error) error {
	if ctx == nil {
		return grain.ErrNilContext
	}
	if wait == nil {
		return ErrNilFunc
	}
	ti := turnForCall(ctx)
	if ti == nil {
		return wait()
	}
	if ti.a.k.interleaves() {
		// As a call that may be re-entered gives the token up (Ask).
		x := ti.a.extra()
		if ti.leaveToken(x, false) {
			ti.w.p.q.PushControl(ctl{op: opWaiting, a: ti.a})
		}
		defer ti.retakeToken(x)
	}
	ti.w.detach() // the turn is about to block: let its partition go
	return wait()
}
