package silo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A cart grain: its state is plain fields, with no lock.
type cart struct{ items []string }

type (
	addItem  struct{ sku string }
	listCart struct{}
)

func (c *cart) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case addItem:
		if m.sku == "" {
			return nil, errors.New("cart: empty sku")
		}
		c.items = append(c.items, m.sku)
		return len(c.items), nil
	case listCart:
		return append([]string(nil), c.items...), nil
	}
	return nil, fmt.Errorf("cart: unknown message %T", msg)
}

// Register a kind with options, talk to grains by identity, shut down.
func ExampleRegister() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "cart", func(grain.ID) *cart { return &cart{} },
		silo.WithIdleTimeout(30*time.Minute),
		silo.WithMaxBacklog(1000, silo.RejectNewest),
		silo.WithSupervision(activation.Supervision{MaxRestarts: 3, Window: time.Minute}),
	)
	_ = s.Start()
	ctx := context.Background()

	id := grain.NewID("cart", "user-17")
	_ = s.Tell(ctx, id, addItem{"apple"})
	n, _ := silo.Call[int](ctx, s, id, addItem{"pear"})
	items, _ := silo.Call[[]string](ctx, s, id, listCart{})
	_, err := silo.Call[int](ctx, s, id, addItem{""})
	fmt.Println(n, items, err)

	_ = s.Shutdown(ctx)
	fmt.Println(errors.Is(s.Tell(ctx, id, listCart{}), silo.ErrSiloClosed))
	// Output:
	// 2 [apple pear] cart: empty sku
	// true
}

// broken is a grain whose activation always fails.
type broken struct{ cart }

func (broken) OnActivate(context.Context, *grain.Context) error {
	return errors.New("storage unavailable")
}

// Dead letters: what could not be delivered, and why.
func ExampleSilo_SubscribeDeadLetters() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "broken", func(grain.ID) *broken { return &broken{} })
	_ = s.Start()
	defer s.Close()
	dl := s.SubscribeDeadLetters(16)
	ctx := context.Background()

	_ = s.Tell(ctx, grain.NewID("broken", "b1"), addItem{"apple"}) // accepted...
	d := <-dl.C                                                    // ...but never handled
	fmt.Println(d.Target, "|", d.Reason, "|", d.Err)
	fmt.Println(d) // the same, as a line

	_, err := s.Ask(ctx, grain.NewID("broken", "b2"), listCart{})
	fmt.Println(errors.Is(err, grain.ErrActivation), errors.Is(err, grain.ErrDeadLetter))
	// Output:
	// broken/b1 | activation failed | granary: activating broken/b1: storage unavailable
	// granary: dead letter: tell silo_test.addItem to broken/b1: activation failed (granary: activating broken/b1: storage unavailable)
	// true true
}

// A lookup grain: slow work runs on a goroutine of its own, and its result
// comes back to the grain as a message, so the cache is only touched in
// turns.
type lookupGrain struct{ cache map[string]string }

type (
	lookup struct {
		key  string
		done chan<- struct{} // closed once the result is cached
	}
	found struct {
		key, value string
		done       chan<- struct{}
	}
	cached struct{ key string }
)

func (g *lookupGrain) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case lookup:
		// ctx and c belong to this turn: copy out what the work needs.
		self, rt := c.ID(), c.Silo()
		go func() {
			v := strings.ToUpper(m.key) // the slow part
			// The work's own context, not the turn's.
			_ = rt.Tell(context.Background(), self, found{m.key, v, m.done})
		}()
		return nil, nil
	case found:
		g.cache[m.key] = m.value // back in a turn: no lock
		close(m.done)
		return nil, nil
	case cached:
		return g.cache[m.key], nil
	}
	return nil, fmt.Errorf("lookup: unknown message %T", msg)
}

// Work that outlives a turn hands its result back to the grain as a message
// ("pipe to self"): it never uses the turn's ctx or *grain.Context.
func Example_pipeToSelf() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "lookup", func(grain.ID) *lookupGrain {
		return &lookupGrain{cache: map[string]string{}}
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	id := grain.NewID("lookup", "l1")
	done := make(chan struct{})
	_ = s.Tell(ctx, id, lookup{"granary", done})
	<-done
	v, _ := silo.Call[string](ctx, s, id, cached{"granary"})
	fmt.Println(v)
	// Output: GRANARY
}

// An admin grain stops the silo it runs in. Shutdown cannot wait there — it
// would wait for the very turn that called it — so it begins the shutdown
// and says so; the program waits on Done.
func ExampleSilo_Done() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "admin", func(grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			return nil, s.Shutdown(ctx)
		}
	})
	_ = s.Start()
	ctx := context.Background()

	_, err := s.Ask(ctx, grain.NewID("admin", "root"), "shut down")
	fmt.Println(errors.Is(err, silo.ErrShutdownFromTurn))
	<-s.Done()
	fmt.Println(errors.Is(s.Tell(ctx, grain.NewID("admin", "root"), "hello"), silo.ErrSiloClosed))
	// Output:
	// true
	// true
}
