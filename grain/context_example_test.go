package grain_test

import (
	"context"
	"fmt"
	"time"

	"github.com/granary-go/granary/grain"
)

// A grain can be unit-tested without a silo: build a Context with doubles
// for the runtime and the activation, and call Receive.
type greeter struct{ greeted int }

func (g *greeter) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	g.greeted++
	if g.greeted == 3 {
		c.DeactivateOnIdle() // enough for today
	}
	return fmt.Sprintf("hello %v, I am %s (#%d)", msg, c.ID().Key(), g.greeted), nil
}

// fakeSelf records what the grain asked of its activation.
type fakeSelf struct{ deactivate bool }

func (f *fakeSelf) DeactivateOnIdle()                                          { f.deactivate = true }
func (f *fakeSelf) DelayDeactivation(time.Duration)                            {}
func (f *fakeSelf) StartTimer(string, time.Duration, time.Duration, any) error { return nil }
func (f *fakeSelf) StopTimer(string)                                           {}
func (f *fakeSelf) Now() time.Time                                             { return time.Time{} }

func ExampleNewContext() {
	g := &greeter{}
	self := &fakeSelf{}
	c := grain.NewContext(grain.NewID("greeter", "eve"), grain.ID{}, nil, self)
	for _, who := range []string{"ann", "bob", "cy"} {
		reply, _ := g.Receive(context.Background(), &c, who)
		fmt.Println(reply)
	}
	fmt.Println("asked to deactivate:", self.deactivate)
	// Output:
	// hello ann, I am eve (#1)
	// hello bob, I am eve (#2)
	// hello cy, I am eve (#3)
	// asked to deactivate: true
}
