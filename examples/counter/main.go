// Command counter is Granary's classic demo: 8 goroutines each send 1,000
// increments to one counter grain, then ask it for the total, which is
// exactly 8,000 because the grain runs one turn at a time.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Incr adds N to the counter.
type Incr struct{ N int }

// Get asks for the counter's value.
type Get struct{}

// Counter is a grain: its state is a plain int, with no lock.
type Counter struct{ n int }

// Receive handles one message per turn.
func (c *Counter) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case Incr:
		c.n += m.N
		return nil, nil
	case Get:
		return c.n, nil
	}
	return nil, fmt.Errorf("counter: unknown message %T", msg)
}

func run(ctx context.Context) (int, error) {
	s, err := silo.New(silo.Config{})
	if err != nil {
		return 0, err
	}
	if err := silo.Register(s, "counter", func(grain.ID) *Counter { return &Counter{} }); err != nil {
		return 0, err
	}
	if err := s.Start(); err != nil {
		return 0, err
	}
	defer s.Close()

	ref := grain.NewID("counter", "player-42") // a reference: creates nothing
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if err := s.Tell(ctx, ref, Incr{N: 1}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	// Tells from one sender arrive in order, and this ask is sent after all
	// of them, by the goroutine that waited for every sender.
	n, err := silo.Call[int](ctx, s, ref, Get{})
	if err != nil {
		return 0, err
	}
	return n, s.Shutdown(ctx)
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "counter:", err)
		os.Exit(1)
	}
	fmt.Println("total:", n)
}
