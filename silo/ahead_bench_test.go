package silo_test

import (
	"context"
	"math"
	"testing"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// BenchmarkTellBesideWorkUnderWay: BenchmarkTell on one partition where
// two grains bounce a ball all the while — every hop a send from a turn,
// after which the owner looks ahead in its batch of tells for work under
// way to run first (silo/ahead.go): the look's cost where it finds the
// most to look at and the least to run.
func BenchmarkTellBesideWorkUnderWay(b *testing.B) {
	s, err := silo.New(silo.Config{Partitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	ping := registerPair(b, s)
	if err := silo.Register(s, "b", func(grain.ID) *benchGrain { return &benchGrain{} }); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() }) // the ball still bouncing: a dead letter
	ctx := context.Background()
	if err := s.Tell(ctx, ping, &ball{left: math.MaxInt, done: make(chan struct{})}); err != nil {
		b.Fatal(err)
	}
	ids := tellLoop(b, s, ctx, "b")
	b.StopTimer()
	for _, id := range ids { // wait until all were handled
		done := make(chan struct{})
		_ = s.Tell(ctx, id, &benchSync{done})
		<-done
	}
}
