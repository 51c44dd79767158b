package directory

// LongestRun returns the length of t's longest run of occupied slots: the
// most a lookup or a removal can probe. For tests.
func LongestRun[T any](t *Table[T]) int {
	longest, run := 0, 0
	for pass := 0; pass < 2; pass++ { // twice round, for a run that wraps
		for _, s := range t.slots {
			if s.v == nil {
				run = 0
				continue
			}
			run++
			longest = max(longest, min(run, len(t.slots)))
		}
	}
	return longest
}
