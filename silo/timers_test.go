package silo_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A partition keeps its grains' timers in one heap under one clock timer
// (silo/timers.go): ticks come in due order across grains and within one,
// a grain with many timers (past the list it searches in order) finds each
// by name to stop or replace it, and a grain's timers leave the heap with
// it.
func TestManyTimersOnOnePartitionTickInDueOrder(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ticks := make(chan string, 1000)
	var overlaps atomic.Int64
	j := newJournal()
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleTimeout: -1}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ticker", func(grain.ID) *ticker { return &ticker{guard: turnGuard{overlaps: &overlaps}, ticks: ticks, j: j} }))
	})
	ctx := ctxT(t)
	call := func(id grain.ID, m any) {
		t.Helper()
		_, err := s.Ask(ctx, id, m)
		require.NoError(t, err)
	}
	a, b := grain.NewID("ticker", "a"), grain.NewID("ticker", "b")
	// a: twenty one-shot timers, due 1 s apart, started out of order; b:
	// one between each two of them.
	for _, i := range []int{7, 3, 19, 0, 12, 5, 16, 1, 9, 14, 2, 18, 4, 11, 6, 17, 8, 13, 10, 15} {
		call(a, startTimer{fmt.Sprintf("a%02d", i), time.Duration(2*i+2) * time.Second, 0})
		call(b, startTimer{fmt.Sprintf("b%02d", i), time.Duration(2*i+3) * time.Second, 0})
	}
	// Stop three of a's, and move one of b's to the end.
	call(a, stopTimer{"a04"})
	call(a, stopTimer{"a11"})
	call(a, stopTimer{"a19"})
	call(b, startTimer{"b00", 100 * time.Second, 0})
	var want []string
	for i := range 20 {
		if i != 4 && i != 11 && i != 19 {
			want = append(want, fmt.Sprintf("a%02d", i))
		}
		if i != 0 {
			want = append(want, fmt.Sprintf("b%02d", i))
		}
	}
	want = append(want, "b00")
	var got []string
	for range 100 {
		clk.Advance(time.Second)
		call(a, get{}) // a barrier: the ticks now due have run
		call(b, get{})
		for len(ticks) > 0 {
			got = append(got, <-ticks)
		}
	}
	assert.Equal(t, want, got)
	assert.Zero(t, overlaps.Load())

	// A repeating timer keeps ticking; a grain's timers go with it.
	call(a, startTimer{"every", time.Second, time.Second})
	for range 3 {
		clk.Advance(time.Second)
		call(a, get{})
	}
	require.Len(t, ticks, 3)
	for len(ticks) > 0 {
		<-ticks
	}
	require.NoError(t, s.Deactivate(ctx, a))
	require.Equal(t, "ticker", <-j.deact)
	clk.Advance(10 * time.Second)
	call(b, get{})
	assert.Empty(t, ticks, "no tick for a grain that has gone")
	assert.Zero(t, clk.Pending(), "no clock timer armed with no grain timer running")
}
