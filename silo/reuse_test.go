package silo

import "testing"

// A work list keeps its array while its uses fill it well, and lets a
// burst's array go at the first use that fills under an eighth of it.
func TestReuseLetsABurstsArrayGo(t *testing.T) {
	small := make([]int, 10, reuseKeep)
	if got := reuse(small, 1); cap(got) != reuseKeep || len(got) != 0 {
		t.Fatalf("a small list is kept: cap %d len %d", cap(got), len(got))
	}
	big := make([]int, 100_000)
	if got := reuse(big, 100_000); cap(got) != 100_000 || len(got) != 0 {
		t.Fatalf("a list just filled is kept: cap %d len %d", cap(got), len(got))
	}
	if got := reuse(big, 100_000/8-1); got != nil {
		t.Fatalf("a list filled under an eighth is let go: cap %d", cap(got))
	}
}
