package queues

import (
	"fmt"
	"math/bits"

	"github.com/granary-go/granary/grain"
)

// Partitioner maps a grain identity to one of N partitions: partition =
// (id.Hash() × N) >> 64, the high word of the 128-bit product, where Hash is
// the xxhash64 documented on grain.ID — Lemire's multiply-shift, which
// spreads the hashes over [0, N) as evenly as a modulo does, at the cost of
// a multiplication instead of a division (a 64-bit DIV takes tens of
// cycles on many CPUs, and every send takes one). The mapping depends only
// on the identity and N, so it is the same in every process and every run.
// The zero Partitioner is not usable (N is 0); make one with
// NewPartitioner.
type Partitioner struct {
	n uint64
}

// NewPartitioner returns a partitioner over n partitions, n >= 1.
func NewPartitioner(n int) (Partitioner, error) {
	if n < 1 {
		return Partitioner{}, fmt.Errorf("%w: %d partitions", grain.ErrInvalidConfig, n)
	}
	return Partitioner{n: uint64(n)}, nil
}

// Partition returns the partition of id, in [0, N).
func (p Partitioner) Partition(id grain.ID) int { return p.PartitionOf(id.Hash()) }

// PartitionOf returns the partition of the identity whose Hash is h.
func (p Partitioner) PartitionOf(h uint64) int {
	hi, _ := bits.Mul64(h, p.n)
	return int(hi)
}

// N returns the number of partitions.
func (p Partitioner) N() int { return int(p.n) }
