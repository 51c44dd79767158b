package silo_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// geoLookup is a request to an outside service, answered on reply.
type geoLookup struct {
	ip    string
	reply chan string
}

// geoService stands for the service: it answers nothing until n requests
// wait on it at once — so the example shows they all did. Closing the
// channel it returns ends it.
func geoService(n int) chan<- geoLookup {
	in := make(chan geoLookup)
	go func() {
		pending := make([]geoLookup, 0, n)
		for r := range in {
			if pending = append(pending, r); len(pending) == n {
				for _, p := range pending {
					p.reply <- "country of " + p.ip
				}
				pending = pending[:0]
			}
		}
	}()
	return in
}

// A grain whose turns wait — on an HTTP service, a database, other grains —
// rather than compute is made reentrant and waits in silo.Await: while one
// turn waits, the next message runs, so one activation serves every caller
// at once. Here twenty lookups wait on the service together through a
// stateless worker on a two-partition silo, which would otherwise run two
// at a time (its activations are capped at the partitions); an Orleans
// [StatelessWorker] with async calls behaves alike.
func Example_workThatWaits() {
	const callers = 20
	svc := geoService(callers)
	defer close(svc)
	s, _ := silo.New(silo.Config{Partitions: 2})
	_ = silo.Register(s, "geo", func(grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			var country string
			err := silo.Await(ctx, func() error { // other turns run while this one waits
				r := geoLookup{ip: msg.(string), reply: make(chan string, 1)}
				svc <- r
				select {
				case country = <-r.reply:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			return country, err
		}
	}, silo.WithStatelessWorker(0), silo.WithReentrant())
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	geo := grain.NewID("geo", "eu")
	var wg sync.WaitGroup
	answers := make([]string, callers)
	for i := range callers {
		wg.Go(func() {
			answers[i], _ = silo.Call[string](ctx, s, geo, fmt.Sprintf("10.0.0.%d", i))
		})
	}
	wg.Wait()
	fmt.Println(answers[0])
	fmt.Println(answers[callers-1])
	fmt.Println("activations at most two:", s.Stats().Activations["geo"] <= 2)
	// Output:
	// country of 10.0.0.0
	// country of 10.0.0.19
	// activations at most two: true
}
