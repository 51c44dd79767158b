package silo_test

import (
	"context"
	"testing"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// awaitHold holds its grain's turn in silo.Await until release is closed,
// after saying so on in: the partition goes on at once, and what comes for
// the grain meanwhile waits in its mailbox.
type awaitHold struct{ in, release chan struct{} }

type burstGrain struct{ n int }

func (g *burstGrain) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case *benchIncr:
		g.n++
	case *benchSync:
		close(m.done)
	case *awaitHold:
		close(m.in)
		return nil, silo.Await(ctx, func() error { <-m.release; return nil })
	case int:
		return g.n, nil
	}
	return nil, nil
}

// BenchmarkTellBurstToBusyGrain: a burst of 100 tells to a grain whose turn
// holds it, so that they wait in its mailbox, then the turn ends and the
// burst drains — a device's grain sent a batch of readings while it saves,
// a player's while it calls another grain. Reported per burst.
func BenchmarkTellBurstToBusyGrain(b *testing.B) {
	const burst = 100
	s, err := silo.New(silo.Config{Partitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "burst", func(grain.ID) *burstGrain { return &burstGrain{} }); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	id, sib := grain.NewID("burst", "busy"), grain.NewID("burst", "sibling")
	if _, err := s.Ask(ctx, id, 0); err != nil { // activated before the timing
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h := &awaitHold{in: make(chan struct{}), release: make(chan struct{})}
		if err := s.Tell(ctx, id, h); err != nil {
			b.Fatal(err)
		}
		<-h.in
		for range burst {
			if err := s.Tell(ctx, id, incrMsg); err != nil {
				b.Fatal(err)
			}
		}
		// The sibling's answer comes after the burst reached the busy
		// grain's mailbox: one partition, its queue in the order of sending.
		if _, err := s.Ask(ctx, sib, 0); err != nil {
			b.Fatal(err)
		}
		close(h.release)
		done := &benchSync{done: make(chan struct{})}
		if err := s.Tell(ctx, id, done); err != nil {
			b.Fatal(err)
		}
		<-done.done
	}
	b.StopTimer()
	n, err := silo.Call[int](ctx, s, id, 0)
	if err != nil || n != b.N*burst {
		b.Fatalf("counted %d, %v; want %d", n, err, b.N*burst)
	}
}
