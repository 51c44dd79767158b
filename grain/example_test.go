package grain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/granary-go/granary/grain"
)

func ExampleNewID() {
	player := grain.NewID("player", "alice")
	device := grain.NewIntID("device", 42)
	fmt.Println(player, player.Kind(), player.Key())
	fmt.Println(device, device.Key())
	fmt.Println(player == grain.NewID("player", "alice"))
	// Output:
	// player/alice player alice
	// device#42 42
	// true
}

func ExampleParseID() {
	id, err := grain.ParseID("cart/u-17")
	fmt.Println(id.Kind(), id.Key(), err)
	_, err = grain.ParseID("cart/")
	fmt.Println(errors.Is(err, grain.ErrEmptyKey))
	// Output:
	// cart u-17 <nil>
	// true
}

// A listing of identities — ActiveGrains' come in no order — sorted by
// kind, then key; and the same IDs as JSON, where a zero ID (a match's
// opponent not found yet) is the empty text.
func ExampleID_Compare() {
	ids := []grain.ID{grain.NewID("player", "bob"), grain.NewIntID("device", 7), grain.NewID("player", "alice")}
	slices.SortFunc(ids, grain.ID.Compare)
	fmt.Println(ids)
	b, _ := json.Marshal(struct {
		Player, Opponent grain.ID
	}{Player: ids[1]})
	fmt.Println(string(b))
	// Output:
	// [device#7 player/alice player/bob]
	// {"Player":"player/alice","Opponent":""}
}

// A filter is plain code around a grain's turn, so it can be tried without
// a silo: give it a Context and, as next, the grain (here a grain.Func).
func ExampleFilterFunc() {
	requireAuth := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		if _, signed := c.Sender(); !signed {
			return nil, errors.New("unsigned: refused")
		}
		return next.Receive(ctx, c, msg)
	})
	echo := grain.Func(func(_ context.Context, _ *grain.Context, msg any) (any, error) { return msg, nil })

	anonymous := grain.NewContext(grain.NewID("vault", "v1"), grain.ID{}, nil, nil)
	_, err := requireAuth.Intercept(context.Background(), &anonymous, "open", echo)
	fmt.Println(err)

	fromAlice := grain.NewContext(grain.NewID("vault", "v1"), grain.NewID("user", "alice"), nil, nil)
	reply, err := requireAuth.Intercept(context.Background(), &fromAlice, "open", echo)
	fmt.Println(reply, err)
	// Output:
	// unsigned: refused
	// open <nil>
}

// Notify tells every subscriber, whatever fails: a client that reads too
// slowly is one failure, counted and named, and the others are told; a
// closed observer is dropped from the list. (In a grain, the Teller is the
// turn's Context.Silo(); here a grain.TellerFunc refuses two subscribers.)
func ExampleObservers_Notify() {
	var room grain.Observers
	for _, name := range []string{"ann", "bob", "cyd"} {
		_, _ = room.Subscribe(grain.NewID(grain.ObserverKind, name))
	}
	tell := grain.TellerFunc(func(_ context.Context, id grain.ID, _ any) error {
		switch id.Key() {
		case "bob":
			return grain.ErrOverloaded // its buffer is full
		case "cyd":
			return grain.ErrObserverClosed // it went away
		}
		return nil
	})
	err := room.Notify(context.Background(), tell, "the match begins")
	fmt.Println(err)
	fmt.Println(errors.Is(err, grain.ErrOverloaded), room.Len())
	// Output:
	// granary: notify: 1 subscriber not told: granary.observer/bob: granary: grain overloaded
	// true 2
}
