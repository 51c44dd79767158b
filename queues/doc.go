// Package queues owns the silo's fixed set of partition queues: the envelope
// they carry, the multi-producer queue each partition drains, and the
// stable mapping of a grain identity to its partition.
//
// Every message for a grain goes through the one queue its identity hashes
// to, and one goroutine at a time drains that queue. That is what gives the
// silo one turn at a time per grain without a goroutine, or a lock, per grain.
//
// The message lane is bounded. A sender that finds it full and waits
// (PushOrWait) is woken by the consumer's next Drain, which holds room for
// it: senders that push in a loop cannot starve one that waited. It tries
// again with the channel it waited on, or gives its place up (GiveUp).
//
// A queue closes in two steps when its owner shuts down gracefully:
// Restrict refuses new work while the work under way may still push
// (PushLateOrWait), and MarkIdle lets a set of queues tell when all of them
// are quiet at once; Close then refuses every message (the control lane
// stays open: the runtime's own items must reach the consumer until it
// stops). Discard, once the consumer has stopped for good, hands back what
// both lanes hold and drops what is pushed later, so a queue no one reads
// holds nothing.
//
// An envelope has a wire form (AppendEnvelope, DecodeEnvelope), the seam
// for silos that pass messages to one another: everything in it but an
// ask's local reply handle is plain data, the message is the application's
// to encode, and the decoder refuses malformed bytes with
// ErrMalformedEnvelope, never a panic.
//
// Concurrency: Queue is safe for concurrent Push from many goroutines; Drain
// and DrainInto must be called by one consumer at a time. Partitioner is
// immutable and safe for concurrent use. Envelope is a value. AppendEnvelope
// and DecodeEnvelope keep no state: safe for concurrent use if the message
// codec is.
package queues
