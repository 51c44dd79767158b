package silo

import (
	"context"
	"testing"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

type nopGrain struct{ n int }

func (g *nopGrain) Receive(context.Context, *grain.Context, any) (any, error) {
	g.n++
	return nil, nil
}

// BenchmarkTurnDispatch measures the partition owner's side of a tell to an
// active grain: directory lookup, the turn, its bookkeeping. No queue, no
// goroutine switch.
func BenchmarkTurnDispatch(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchTurnDispatch(b, nil) })
	// Two filters that pass the turn on: what a filtered kind adds to a turn.
	pass := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		return next.Receive(ctx, c, msg)
	})
	b.Run("two-filters", func(b *testing.B) { benchTurnDispatch(b, []grain.Filter{pass, pass}) })
}

func benchTurnDispatch(b *testing.B, filters []grain.Filter) {
	s, err := New(Config{Partitions: 1, Filters: filters})
	if err != nil {
		b.Fatal(err)
	}
	if err := Register(s, "k", func(grain.ID) *nopGrain { return &nopGrain{} }); err != nil {
		b.Fatal(err)
	}
	s.base = context.Background() // not started: this goroutine is the owner
	if err := s.setIdleQuantum(); err != nil {
		b.Fatal(err)
	}
	p := s.parts[0]
	w := newWorker(p, false)
	ids := make([]queues.Envelope, 1024)
	msg := &struct{}{}
	for i := range ids {
		id := grain.NewIntID("k", int64(i))
		ids[i] = queues.Envelope{Target: id, Hash: id.Hash(), Msg: msg}
		p.deliver(w, &ids[i]) // activate
		p.runReady(w, len(p.ready))
		p.runReady(w, len(p.ready))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !p.deliver(w, &ids[i&1023]) {
			b.Fatal("handed off")
		}
	}
}
