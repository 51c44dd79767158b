package silo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// guessGrain counts the messages each of its activations took, and, told a
// removeEntry, takes another grain's entry out of the directory from inside
// its turn — as a turn that ends its grain for good can, on the owner.
type guessGrain struct {
	took  *map[*guessGrain]int
	owner **partition
}

type removeEntry struct{ id grain.ID }

func (g *guessGrain) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	(*g.took)[g]++
	if m, ok := msg.(removeEntry); ok {
		p := *g.owner
		a, found := p.dir.Get(m.id, m.id.Hash())
		if !found {
			panic("removeEntry: no entry")
		}
		p.remove(a)
	}
	return nil, nil
}

// The owner delivers a message with the directory's guess made a few
// messages earlier, as it prefetched (partition.guessFor). An entry
// removed in between must not be taken: the message would go to a record
// that left the directory, and wait in its mailbox for ever.
func TestADeliveryNeverTakesAGuessOfAnEntryRemovedSince(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	took := map[*guessGrain]int{}
	var p *partition
	require.NoError(t, Register(s, "g", func(grain.ID) *guessGrain { return &guessGrain{took: &took, owner: &p} }))
	s.base = context.Background()
	require.NoError(t, s.setIdleQuantum())
	p = s.parts[0]
	p.multiP = true // prefetching at any size, as on more than one P
	w := newWorker(p, false)

	env := func(key string, msg any) queues.Envelope {
		id := grain.NewID("g", key)
		return queues.Envelope{Target: id, Hash: id.Hash(), Msg: msg}
	}
	x := grain.NewID("g", "x")
	for _, key := range []string{"x", "a", "b", "c", "d"} {
		e := env(key, "hello") // activate
		require.True(t, p.deliver(w, &e))
	}
	old, ok := p.dir.Get(x, x.Hash())
	require.True(t, ok)
	oldGrain := old.g.(*guessGrain)

	// One round: the guess for x's message (fifth) is made as the first is
	// delivered, which removes x's entry.
	round := []queues.Envelope{
		env("a", removeEntry{x}), env("b", "pad"), env("c", "pad"), env("d", "pad"),
		env("x", "after"),
		env("a", "pad"), env("b", "pad"), env("c", "pad"), env("d", "pad"), env("a", "pad"), env("b", "pad"), env("c", "pad"),
	}
	for _, e := range round {
		require.NoError(t, p.q.Push(e))
	}
	require.True(t, p.step(w)) // drains the round
	more := env("d", "pad")
	require.NoError(t, p.q.Push(more)) // so that the next step has a round after it, and does not park
	require.True(t, p.step(w))         // delivers it

	require.Equal(t, 1, took[oldGrain], "x's removed activation took a message after it left the directory")
	cur, ok := p.dir.Get(x, x.Hash())
	require.True(t, ok, "x's message made no fresh activation")
	require.NotSame(t, old, cur)
	require.Equal(t, 1, took[cur.g.(*guessGrain)], "x's fresh activation did not take its message")
}
