package silo_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"testing"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

type Cart struct{ items map[string]int }

type (
	Add struct {
		SKU string
		N   int
	}
	Items    struct{}
	autosave struct{}
	Reserve  struct{ N int }
)

var errCorrupt = errors.New("corrupt")

func (c *Cart) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case Add:
		if m.N <= 0 {
			return nil, fmt.Errorf("cart: bad quantity %d", m.N)
		}
		c.items[m.SKU] += m.N
		gc.StartTimer("autosave", time.Minute, time.Minute, autosave{})
		gc.DelayDeactivation(time.Hour)
		return len(c.items), nil
	case Items:
		return maps.Clone(c.items), nil
	case autosave:
		return nil, nil
	}
	return nil, fmt.Errorf("cart: unknown message %T", msg)
}

// The snippets of docs/guide.md, compiled and run, so the guide cannot rot.
func TestGuideSnippets(t *testing.T) {
	ctx := context.Background()
	s, err := silo.New(silo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = silo.Register(s, "cart", func(id grain.ID) *Cart {
		return &Cart{items: map[string]int{}}
	}, silo.WithIdleTimeout(30*time.Minute),
		silo.WithSupervision(activation.Supervision{
			Decider: activation.DeciderFunc(func(id grain.ID, err error) activation.Directive {
				if errors.Is(err, errCorrupt) {
					return activation.Stop
				}
				return activation.DefaultDecider(id, err)
			}),
			MaxRestarts: 3, Window: time.Minute,
		}),
		silo.WithMaxBacklog(1000, silo.RejectNewest))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	dl := s.SubscribeDeadLetters(1024)
	go func() {
		for d := range dl.C {
			log.Printf("dead letter to %v: %v (%v)", d.Target, d.Reason, d.Err)
		}
	}()
	cart := grain.NewID("cart", "u1")
	n, err := silo.Call[int](ctx, s, cart, Add{"apple", 2})
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := s.Tell(ctx, cart, Add{"pear", 1}); err != nil {
		t.Fatal(err)
	}
	items, err := silo.Call[map[string]int](ctx, s, cart, Items{})
	if err != nil || items["pear"] != 1 {
		t.Fatal(items, err)
	}
	_ = s.Stats()
	if err := s.Deactivate(ctx, cart); err != nil {
		t.Fatal(err)
	}
}
