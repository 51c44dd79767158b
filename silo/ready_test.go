package silo

import (
	"context"
	"testing"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Grains with deep backlogs re-ready themselves every round; the ready
// queue must not grow with the number of rounds.
func TestReadyQueueStaysBounded(t *testing.T) {
	p, w := ownedPartition(t, context.Background(), Config{})
	const grains, backlog = 200, 50
	acts := make([]*act, grains)
	for i := range acts {
		id := grain.NewIntID("k", int64(i))
		env := queues.Envelope{Target: id, Hash: id.Hash(), Msg: 1}
		p.deliver(w, &env) // activates and runs
		acts[i], _ = p.dir.Get(id, env.Hash)
		acts[i].Turns++ // pretend a turn runs, so messages wait
		for range backlog {
			p.deliver(w, &env)
		}
		acts[i].Turns--
		p.makeReady(acts[i])
	}
	maxLen := 0
	for rounds := 0; p.rhead < len(p.ready); rounds++ {
		if rounds > 10*backlog {
			t.Fatal("the backlog did not drain")
		}
		p.runReady(w, len(p.ready))
		maxLen = max(maxLen, len(p.ready))
	}
	if maxLen > 4*grains {
		t.Fatalf("ready queue grew to %d entries for %d grains", maxLen, grains)
	}
	for _, a := range acts {
		if n := a.g.(*nopGrain).n; n != backlog+1 {
			t.Fatalf("grain handled %d messages, want %d", n, backlog+1)
		}
	}
}
