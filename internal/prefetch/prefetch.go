// Package prefetch asks the CPU to start loading memory that will be read
// soon, without waiting for it: a partition owner uses it to overlap the
// cache misses of the next messages' lookups with the work of the current
// one. A prefetch never faults and has no effect on what a program computes
// (Pointee reads the one word it is given, to learn where to prefetch); on
// architectures without an implementation, each function does nothing.
//
// Go offers no prefetch to user code (the runtime's is internal), hence the
// few lines of assembly.
package prefetch
