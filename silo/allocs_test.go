package silo_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A Tell to an active grain allocates nothing — whether the program builds
// its IDs from a constant kind name or from names made at run time (read
// from a request, say), whose bytes lie at a new address each time.
func TestTellAllocatesNothing(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 2}, nil)
	ctx := ctxT(t)
	const n = 16
	constant, built := make([]grain.ID, n), make([]grain.ID, n)
	for i := range n {
		constant[i] = grain.NewIntID("counter", int64(i))
		built[i] = grain.NewIntID(strings.Clone("counter"), int64(i))
		_, err := s.Ask(ctx, constant[i], get{}) // active, and a barrier
		require.NoError(t, err)
	}
	for name, ids := range map[string][]grain.ID{"constant": constant, "built at run time": built} {
		tell := func() {
			for _, id := range ids {
				if err := s.Tell(ctx, id, get{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		tell()
		if a := testing.AllocsPerRun(100, tell); a != 0 {
			t.Errorf("kind names %s: %v allocations per %d tells", name, a, n)
		}
	}
	for _, id := range constant { // a barrier: every tell was handled
		_, err := s.Ask(ctx, id, get{})
		require.NoError(t, err)
	}
}
