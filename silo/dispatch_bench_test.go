package silo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
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
	p, w := ownedPartition(b, context.Background(), Config{Filters: filters})
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

// BenchmarkOwnerRound measures an owner's rounds over a queue of tells to
// grains drawn at random from many: the drain, the prefetching of the
// messages ahead (with two Ps or more, as Start sets it), the lookups, the
// turns — with no sender running beside it (each round's 1,024 envelopes
// are pushed first, by the owner's own goroutine, and that is timed too).
// At 200,000 grains each message's slot, record and grain miss the caches:
// without the prefetching, a message costs about four times as much. What
// the bench module's tell and zipf measure end to end also depends on how
// the scheduler shares the cores between senders and owners; this is the
// owner's cost alone, for A/B runs of a change on its path.
func BenchmarkOwnerRound(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		b.Run(fmt.Sprintf("grains=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			benchOwnerRound(b, n, func() int { return r.IntN(n) })
		})
	}
	// The bench module's zipf workload, as its hot partition's owner sees
	// it: 100,000 grains, keys drawn with Zipf s=1.1 (the hottest 13 % of
	// the messages, the most cached), the rest spread thin.
	b.Run("zipf", func(b *testing.B) {
		z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, 100_000-1)
		benchOwnerRound(b, 100_000, func() int { return int(z.Uint64()) })
	})
}

func benchOwnerRound(b *testing.B, grains int, key func() int) {
	p, w := ownedPartition(b, context.Background(), Config{})
	p.multiP = runtime.GOMAXPROCS(0) > 1 // as Start sets it: prefetching at any size
	msg := &struct{}{}
	for i := range grains {
		id := grain.NewIntID("k", int64(i))
		p.deliver(w, &queues.Envelope{Target: id, Hash: id.Hash(), Msg: msg}) // activate
		if i%readyBatch == 0 {
			p.runReady(w, len(p.ready))
		}
	}
	for p.rhead < len(p.ready) {
		p.runReady(w, len(p.ready))
	}
	const round = 1024
	envs := make([]queues.Envelope, 1<<16)
	for i := range envs {
		id := grain.NewIntID("k", int64(key()))
		envs[i] = queues.Envelope{Target: id, Hash: id.Hash(), Msg: msg}
	}
	push := func(at int) {
		for j := range round {
			if err := p.q.Push(envs[(at+j)&(len(envs)-1)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	push(0)
	if !p.step(w) { // drains the first round into the batch
		b.Fatal("handed off")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for at := round; at-round < b.N; at += round {
		push(at) // the next round, drained by this step once it has run the last
		if !p.step(w) {
			b.Fatal("handed off")
		}
	}
}
