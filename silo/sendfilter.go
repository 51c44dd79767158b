package silo

import (
	"context"

	"github.com/granary-go/granary/grain"
)

// Send filters (Config.SendFilters, grain.SendFilter) wrap the Runtime
// grains get — their Context's Silo() — rather than the Silo's own Tell
// and Ask: a silo without any gives grains the Silo itself, and no send
// pays for them; one with some gives them a filteredRuntime, which runs
// the filters, composed once at New, and then the Silo's Tell or Ask —
// whichever the sender called, whatever the filters made of Send.Ask.

// Runtime returns what a grain's Context's Silo() returns: the silo, or
// with Config.SendFilters a view of it whose Tell and Ask — and silo.Call,
// and grain.Observers.Notify, given it — run through them. Code outside the
// grains that wants its sends filtered too sends through it. Safe for
// concurrent use.
func (s *Silo) Runtime() grain.Runtime {
	if s == nil || s.rt == nil { // the zero Silo, which refuses every send
		return s
	}
	return s.rt
}

// runtimeView builds what Runtime returns.
func (s *Silo) runtimeView() grain.Runtime {
	fs := s.cfg.SendFilters
	if len(fs) == 0 {
		return s
	}
	tell := grain.SendNext(func(ctx context.Context, m grain.Send) (any, error) {
		return nil, s.Tell(ctx, m.To, m.Msg)
	})
	ask := grain.SendNext(s.askSend)
	for i := len(fs) - 1; i >= 0; i-- {
		f, t, a := fs[i], tell, ask
		tell = func(ctx context.Context, m grain.Send) (any, error) { return f.Send(ctx, m, t) }
		ask = func(ctx context.Context, m grain.Send) (any, error) { return f.Send(ctx, m, a) }
	}
	return &filteredRuntime{s: s, tell: tell, ask: ask}
}

func (s *Silo) askSend(ctx context.Context, m grain.Send) (any, error) {
	return s.Ask(ctx, m.To, m.Msg)
}

// filteredRuntime is a silo's Runtime with send filters. Immutable.
type filteredRuntime struct {
	s         *Silo
	tell, ask grain.SendNext
}

func (r *filteredRuntime) Tell(ctx context.Context, id grain.ID, msg any) error {
	_, err := r.send(ctx, r.tell, grain.Send{To: id, Msg: msg})
	return err
}

func (r *filteredRuntime) Ask(ctx context.Context, id grain.ID, msg any) (any, error) {
	return r.send(ctx, r.ask, grain.Send{To: id, Msg: msg, Ask: true})
}

// send runs a send through chain, its sender named: a nil ctx is refused
// before any filter sees it, as the send itself would refuse it, and a
// filter's panic fails the send instead of reaching the sender.
func (r *filteredRuntime) send(ctx context.Context, chain grain.SendNext, m grain.Send) (reply any, err error) {
	if ctx == nil {
		return nil, grain.ErrNilContext
	}
	if ti := turnFrom(ctx); ti != nil && ti.w.p.s == r.s {
		m.From = ti.a.ID
	}
	defer func() {
		if v := recover(); v != nil {
			reply, err = nil, grain.Recovered(m.To, v)
		}
	}()
	return chain(ctx, m)
}
