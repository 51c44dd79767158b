package silo_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// glance is a message the glancer kind lets in while one of its turns waits;
// its turn waits in silo.Await until gate is closed (nil: not at all),
// saying so on waiting.
type glance struct {
	name    string
	gate    chan struct{}
	waiting chan struct{}
}

// glancer notes each message it handles.
type glancer struct {
	mu  *sync.Mutex
	log *[]string
}

func (g *glancer) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	name, _ := msg.(string)
	p, isGlance := msg.(glance)
	if isGlance {
		name = p.name
	}
	g.mu.Lock()
	*g.log = append(*g.log, name)
	g.mu.Unlock()
	if isGlance && p.gate != nil {
		return nil, silo.Await(ctx, func() error { close(p.waiting); <-p.gate; return nil })
	}
	return nil, nil
}

// A turn whose message the predicate took holds the grain's other
// messages as any turn does: they wait until no turn of the grain is under
// way, and the predicate's messages go on going in while one waits — so a
// grain sent them without pause, each waiting, keeps its other messages
// waiting as long (docs/calls.md). Here the write sent while p1 waited is
// not begun when p1 ends, p2 still waiting; it begins once p2 ends.
// (Orleans differs: there one request at a time holds the others, the
// first to begin while none did, and the write would begin as p1 ended.)
func TestMayInterleaveTurnsHoldTheOthersUntilNoneIsUnderWay(t *testing.T) {
	var mu sync.Mutex
	var log []string
	logged := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), log...) }
	s := newSilo(t, silo.Config{Partitions: 1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "glancer", func(grain.ID) *glancer { return &glancer{mu: &mu, log: &log} },
			silo.WithMayInterleave(func(msg any) bool { _, ok := msg.(glance); return ok })))
	})
	ctx, id := ctxT(t), grain.NewID("glancer", "k")
	ask := func(p glance) <-chan error {
		done := make(chan error, 1)
		go func() { _, err := s.Ask(ctx, id, p); done <- err }()
		return done
	}
	p1 := glance{name: "p1", gate: make(chan struct{}), waiting: make(chan struct{})}
	p2 := glance{name: "p2", gate: make(chan struct{}), waiting: make(chan struct{})}
	first := ask(p1)
	<-p1.waiting
	require.NoError(t, s.Tell(ctx, id, "write")) // to the mailbox: p1's turn is under way
	second := ask(p2)                            // let in: p1 waits
	<-p2.waiting
	close(p1.gate)
	require.NoError(t, <-first)
	_, err := s.Ask(ctx, id, glance{name: "probe"}) // let in beside p2, which waits
	require.NoError(t, err)
	assert.Equal(t, []string{"p1", "p2", "probe"}, logged(), "the write waits while p2 is under way")

	close(p2.gate)
	require.NoError(t, <-second)
	_, err = s.Ask(ctx, id, "last")
	require.NoError(t, err)
	assert.Equal(t, []string{"p1", "p2", "probe", "write", "last"}, logged())
}
