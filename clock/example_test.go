package clock_test

import (
	"fmt"
	"time"

	"github.com/granary-go/granary/clock"
)

// A Manual clock moves only when told to, firing what fell due in order:
// what makes idle deactivation, backoff and timers testable without sleeps.
func ExampleManual() {
	c := clock.NewManual(time.Unix(0, 0))
	start := c.Now()
	c.AfterFunc(2*time.Second, func() { fmt.Println("backoff over") })
	c.AfterFunc(time.Second, func() { fmt.Println("timer tick") })
	c.Advance(500 * time.Millisecond)
	fmt.Println("at", clock.Since(c, start))
	c.Advance(2 * time.Second)
	fmt.Println("at", clock.Since(c, start))
	// Output:
	// at 500ms
	// timer tick
	// backoff over
	// at 2.5s
}
