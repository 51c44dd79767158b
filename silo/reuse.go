package silo

// reuse returns buf emptied for its next use, or nil when it is large and
// its last use filled less than an eighth of it: the owner's work lists
// (grains ready for a step, grains whose idle deadline passed) grow to the
// largest burst they see — a mass deactivation, a backlog across many
// grains — and must not pin that high-water mark for good.
func reuse[T any](buf []T, used int) []T {
	if cap(buf) > reuseKeep && used < cap(buf)/8 {
		return nil
	}
	return buf[:0]
}

// reuseKeep is the capacity a work list keeps whatever its use: below it,
// growing again would cost more than the memory saved.
const reuseKeep = 1024
