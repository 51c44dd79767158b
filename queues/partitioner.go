package queues

import (
	"fmt"

	"github.com/granary-go/granary/grain"
)

// Partitioner maps a grain identity to one of N partitions: partition =
// id.Hash() % N, where Hash is the xxhash64 documented on grain.ID. The
// mapping depends only on the identity and N, so it is the same in every
// process and every run. The zero Partitioner is not usable (N is 0); make
// one with NewPartitioner.
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
func (p Partitioner) Partition(id grain.ID) int { return int(id.Hash() % p.n) }

// PartitionOf returns the partition of the identity whose Hash is h.
func (p Partitioner) PartitionOf(h uint64) int { return int(h % p.n) }

// N returns the number of partitions.
func (p Partitioner) N() int { return int(p.n) }
