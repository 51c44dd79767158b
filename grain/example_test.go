package grain_test

import (
	"errors"
	"fmt"

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
