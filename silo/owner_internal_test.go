package silo

import (
	"context"
	"testing"

	"github.com/granary-go/granary/grain"
)

// ownedPartition returns the one partition of a silo that is not started,
// with kind "k" of nopGrains registered (with opts), and a worker through
// which the calling goroutine is its owner: a test or benchmark drives the
// owner's steps itself, with no goroutine of the silo's running.
func ownedPartition(tb testing.TB, ctx context.Context, cfg Config, opts ...KindOption) (*partition, *worker) {
	tb.Helper()
	cfg.Partitions = 1
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := Register(s, "k", func(grain.ID) *nopGrain { return &nopGrain{} }, opts...); err != nil {
		tb.Fatal(err)
	}
	s.base = ctx
	if err := s.setIdleQuantum(); err != nil {
		tb.Fatal(err)
	}
	p := s.parts[0]
	return p, newWorker(p, false)
}
