package silo_test

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A chat room: it keeps its members' observers and tells them every line.
type room struct{ members grain.Observers }

type (
	join     struct{ who grain.ID }
	chatLine struct{ line string }
)

func (r *room) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case join:
		_, err := r.members.Subscribe(m.who)
		return nil, err
	case chatLine:
		// A closed observer is dropped here; a full one is reported.
		return nil, r.members.Notify(ctx, c.Silo(), m.line)
	}
	return nil, fmt.Errorf("room: unexpected %T", msg)
}

// An observer is how code outside the silo — a client's connection — hears
// from grains: its ID goes to a grain like any grain's, and what the grain
// tells it arrives on the observer's channel.
func ExampleSilo_NewObserver() {
	s, _ := silo.New(silo.Config{})
	_ = silo.Register(s, "room", func(grain.ID) *room { return &room{} })
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	alice, _ := s.NewObserver(16) // alice's connection
	defer alice.Close()
	lobby := grain.NewID("room", "lobby")
	_, _ = s.Ask(ctx, lobby, join{alice.ID()})
	_, _ = s.Ask(ctx, lobby, chatLine{"hello"})
	_, _ = s.Ask(ctx, lobby, chatLine{"anyone here?"})

	for range 2 {
		n, _ := alice.Receive(ctx)
		fmt.Printf("%v from %v\n", n.Msg, n.Sender)
	}
	// Output:
	// hello from room/lobby
	// anyone here? from room/lobby
}
