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
