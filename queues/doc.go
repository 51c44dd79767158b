// Package queues owns the silo's fixed set of partition queues: the envelope
// they carry, the multi-producer queue each partition drains, and the
// stable mapping of a grain identity to its partition.
//
// Every message for a grain goes through the one queue its identity hashes
// to, and one goroutine at a time drains that queue. That is what gives the
// silo one turn at a time per grain without a goroutine, or a lock, per grain.
//
// Concurrency: Queue is safe for concurrent Push from many goroutines; Drain
// must be called by one consumer at a time. Partitioner is immutable and safe
// for concurrent use. Envelope is a value.
package queues
