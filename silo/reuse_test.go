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

// A map by identity is copied into a fresh one once it holds under an
// eighth of the most it held, and not before; its peak starts again there.
func TestRegrowLetsABurstsMapGo(t *testing.T) {
	m := make(map[int]int)
	peak := 0
	for i := range 10_000 {
		m[i] = i
		notePeak(&peak, len(m))
	}
	if peak != 10_000 {
		t.Fatalf("peak %d, want 10000", peak)
	}
	for i := range 8_000 {
		delete(m, i)
	}
	if got := regrow(m, &peak); len(got) != 2_000 || peak != 10_000 {
		t.Fatalf("a map at a fifth of its peak is kept: len %d peak %d", len(got), peak)
	}
	for i := range 9_000 {
		delete(m, i)
	}
	got := regrow(m, &peak)
	if len(got) != 1_000 || peak != 1_000 || got[9_999] != 9_999 {
		t.Fatalf("a map under an eighth of its peak is copied whole: len %d peak %d", len(got), peak)
	}
	got[0] = 0
	if len(m) != 1_000 {
		t.Fatalf("the copy is a map of its own: the old one has %d", len(m))
	}
	small := map[int]int{1: 1}
	speak := 1
	if got := regrow(small, &speak); len(got) != 1 {
		t.Fatalf("a small map is kept: len %d", len(got))
	}
}
