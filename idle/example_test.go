package idle_test

import (
	"fmt"
	"time"

	"github.com/granary-go/granary/idle"
)

// A wheel tracks idle deadlines with O(1) work per message: Touch on every
// message, Advance once per tick to collect what expired.
func ExampleWheel() {
	w, _ := idle.NewWheel[string](time.Second, 0, 0)
	cart, player := &idle.Entry[string]{Value: "cart"}, &idle.Entry[string]{Value: "player"}
	w.Touch(cart, 3*time.Second)   // idle from 3 s on
	w.Touch(player, 5*time.Second) // idle from 5 s on
	w.Touch(player, 9*time.Second) // a message came: 4 s more

	for _, now := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second} {
		var names []string
		for _, e := range w.Advance(now, nil) {
			names = append(names, e.Value)
		}
		fmt.Println(now, names, w.Len())
	}
	// Output:
	// 2s [] 2
	// 4s [cart] 1
	// 8s [] 1
	// 10s [player] 0
}

// An owner that must stay responsive expires a burst a slice at a time,
// serving its other work between the slices: five sessions idle at once,
// two a slice.
func ExampleWheel_AdvanceAtMost() {
	w, _ := idle.NewWheel[string](time.Second, 0, 0)
	for _, name := range []string{"s1", "s2", "s3", "s4", "s5"} {
		w.Touch(&idle.Entry[string]{Value: name}, time.Minute)
	}
	for more := true; more; {
		var expired []*idle.Entry[string]
		expired, more = w.AdvanceAtMost(2*time.Minute, 2, nil)
		var names []string
		for _, e := range expired {
			names = append(names, e.Value)
		}
		fmt.Println(names, "more:", more)
	}
	// Output:
	// [s1 s2] more: true
	// [s3 s4] more: true
	// [s5] more: false
}

// A pass over every entry, taken in slices by an owner that must stay
// responsive — a search for the most idle grains, say, among millions:
// five sessions, two a slice.
func ExampleWheel_EachAtMost() {
	w, _ := idle.NewWheel[string](time.Second, 0, 0)
	for _, name := range []string{"s1", "s2", "s3", "s4", "s5"} {
		w.Touch(&idle.Entry[string]{Value: name}, time.Minute)
	}
	for more := true; more; {
		var names []string
		more = w.EachAtMost(2, func(e *idle.Entry[string]) bool {
			names = append(names, e.Value)
			return true
		})
		fmt.Println(names, "more:", more)
	}
	// Output:
	// [s1 s2] more: true
	// [s3 s4] more: true
	// [s5] more: false
}
