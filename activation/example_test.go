package activation_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
)

// A supervision policy decides what a failed turn leads to: a returned
// error resumes, a panic restarts with backoff, too many restarts stop.
func ExampleSupervision_Decide() {
	policy := activation.Supervision{MaxRestarts: 3, Window: time.Minute}.WithDefaults()
	id := grain.NewID("player", "p1")
	var history activation.Restarts

	d, _ := policy.Decide(&history, id, errors.New("bad move"), 0)
	fmt.Println(d)
	panicked := &grain.PanicError{ID: id, Value: "boom"}
	for i := range 4 {
		d, backoff := policy.Decide(&history, id, panicked, time.Duration(i)*time.Second)
		fmt.Println(d, backoff)
	}
	// Output:
	// resume
	// restart 0s
	// restart 10ms
	// restart 20ms
	// stop 0s
}

// Run runs one turn and turns a panic into an error, so a grain can never
// take down the goroutine that runs it.
func ExampleRun() {
	id := grain.NewID("player", "p1")
	c := grain.NewContext(id, grain.ID{}, nil, nil)
	g := grain.Func(func(_ context.Context, _ *grain.Context, msg any) (any, error) {
		if msg == "explode" {
			panic("kaboom")
		}
		return "ok: " + msg.(string), nil
	})
	reply, err := activation.Run(context.Background(), g, &c, "move")
	fmt.Println(reply, err)
	_, err = activation.Run(context.Background(), g, &c, "explode")
	var pe *grain.PanicError
	fmt.Println(errors.As(err, &pe), pe.Value)
	// Output:
	// ok: move <nil>
	// true kaboom
}

// The lifecycle is a state machine: moves it does not allow are refused.
func ExampleActivation_Transition() {
	var a activation.Activation // Activating
	fmt.Println(a.State(), a.Transition(activation.Active), a.State())
	fmt.Println(a.Transition(activation.Activating))
	// Output:
	// activating <nil> active
	// activation: illegal transition active -> activating
}
