// Package directory answers "where does this grain live?". Locate gives a
// grain's Location (silo and partition); Table is the activation table of one
// partition, which maps an identity to its single activation.
//
// A Table is split by partition and owned by that partition's goroutine, so a
// lookup takes no lock. Because every message for an identity is routed to
// the same partition, and that partition's owner is the only code that
// inserts into its Table, two racing first messages can never create two
// activations of one identity in a silo.
//
// Concurrency: Table is not safe for concurrent use; its owner serialises
// access. Local is immutable and safe for concurrent use.
package directory
