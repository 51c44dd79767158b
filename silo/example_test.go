package silo_test

import (
	"context"
	"errors"
	"fmt"
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

	_, err := s.Ask(ctx, grain.NewID("broken", "b2"), listCart{})
	fmt.Println(errors.Is(err, grain.ErrActivation), errors.Is(err, grain.ErrDeadLetter))
	// Output:
	// broken/b1 | activation failed | granary: activating broken/b1: storage unavailable
	// true true
}
