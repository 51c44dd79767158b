package silo_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/silo"
)

// A subscription's buffer is held between 1 and MaxDeadLetterBuffer: a
// negative or huge size is no panic in the caller.
func TestDeadLetterBufferIsBounded(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	for _, n := range []int{math.MinInt, -1, 0, 1, 64, math.MaxInt} {
		d := s.SubscribeDeadLetters(n)
		require.Equal(t, min(max(n, 1), silo.MaxDeadLetterBuffer), cap(d.C), "buffer %d", n)
		d.Cancel()
	}
}

// A subscription made after the silo stopped is closed at once — a range
// over it ends instead of waiting for dead letters that will never come —
// and cancelling one of several leaves the others subscribed.
func TestDeadLetterSubscriptionsAroundClose(t *testing.T) {
	s := newSilo(t, silo.Config{}, nil)
	a, b, c := s.SubscribeDeadLetters(4), s.SubscribeDeadLetters(4), s.SubscribeDeadLetters(4)
	b.Cancel()
	_, open := <-b.C
	require.False(t, open, "cancelled: closed")
	require.NoError(t, s.Close())
	for _, d := range []*silo.DeadLetters{a, c} {
		for range d.C { // closed with the silo, after what it had
		}
	}
	late := s.SubscribeDeadLetters(4)
	_, open = <-late.C
	require.False(t, open, "subscribed after Close: closed at once")
	late.Cancel() // harmless
	a.Cancel()    // after the silo closed it: harmless
}
