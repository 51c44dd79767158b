package silo

import "slices"

// reuse returns buf emptied for its next use, or nil when it is large and
// its last use filled less than an eighth of it: the owner's work lists
// (grains ready for a step, grains whose idle deadline passed, the two
// arrays its partition queue's control lane alternates between) grow to
// the largest burst they see — a mass deactivation, a backlog across many
// grains, a crowd of Deactivates from outside — and must not
// pin that high-water mark for good (TestABurstOfControlItemsLeavesNoArrayBehind).
func reuse[T any](buf []T, used int) []T {
	if cap(buf) > reuseKeep && used < cap(buf)/8 {
		return nil
	}
	return buf[:0]
}

// reuseKeep is the capacity a work list keeps whatever its use: below it,
// growing again would cost more than the memory saved.
const reuseKeep = 1024

// regrow returns m, or m copied into a map sized to what it holds when it
// once held more than reuseKeep entries and holds under an eighth of that
// now: a Go map keeps the room of its largest size for good, so the
// owner's maps by identity — the grains quarantined, the asks handled off
// the partition — would pin a burst's high-water mark (100,000 grains
// stopped by supervision at once: 9 MB held once every quarantine was
// over; TestACrowdOfQuarantinesLeavesNoRoomBehind). *peak is the most m
// has held since it was made; its writers raise it (notePeak).
func regrow[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if *peak <= reuseKeep || len(m) >= *peak/8 {
		return m
	}
	fresh := make(map[K]V, len(m))
	for k, v := range m {
		fresh[k] = v
	}
	*peak = len(m)
	return fresh
}

// notePeak raises *peak to n.
func notePeak(peak *int, n int) {
	if n > *peak {
		*peak = n
	}
}

// shrink returns s, or s copied into an array of its own size when s's
// array is large and s fills under an eighth of it: a list that keeps its
// entries across uses (activation turns handed off, timers due) lets a
// burst's array go as the burst drains.
func shrink[T any](s []T) []T {
	if cap(s) > reuseKeep && len(s) < cap(s)/8 {
		return slices.Clone(s)
	}
	return s
}
