// Package idle finds the activations that have been idle too long, at O(1)
// cost per message and without a timer per grain.
//
// Wheel is a hashed timing wheel: a ring of slots, one per tick (the
// quantum), each an intrusive list of entries whose deadline falls in that
// tick. A message only moves its grain's deadline forward (Touch stores a
// number); the entry stays in its old slot until the wheel's cursor reaches
// that slot, and is then re-filed under its real deadline or reported as
// expired. So the hot path never touches a list, and Advance visits only the
// slots between the last tick and now. AdvanceAtMost does the same work in
// slices, going on where it stopped, so that a burst — a million entries
// due in one tick — need not be expired all at once; EachAtMost takes a
// pass over every entry in slices the same way (the search for the most
// idle grains, when memory is short).
//
// Wheel does no I/O, starts no goroutine and reads no clock: its owner passes
// the time in, which makes it deterministic under test. Times are offsets
// (time.Duration) from an epoch the owner picks, taken from a monotonic clock,
// so a wall-clock jump cannot cause mass deactivation.
//
// Concurrency: Wheel is not safe for concurrent use; one partition owns it.
package idle
