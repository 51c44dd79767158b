package directory

import (
	"fmt"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Location is where a grain's activation lives: which silo, and which
// partition of that silo.
type Location struct {
	Silo      string
	Partition int
}

// Locator finds the location of a grain. A single silo uses Local; a cluster
// will plug in a distributed directory here.
type Locator interface {
	Locate(id grain.ID) (Location, error)
}

// LocatorFunc adapts a function to Locator.
type LocatorFunc func(id grain.ID) (Location, error)

// Locate calls f.
func (f LocatorFunc) Locate(id grain.ID) (Location, error) { return f(id) }

// Local places every grain on one silo, in the partition its identity hashes
// to. Its Partitioner comes from queues.NewPartitioner: with the zero one,
// Locate fails with grain.ErrInvalidConfig (and LocateHash, on the hot
// path, has no check).
type Local struct {
	Silo        string
	Partitioner queues.Partitioner
}

// Locate implements Locator.
func (l Local) Locate(id grain.ID) (Location, error) {
	if l.Partitioner.N() == 0 {
		return Location{}, fmt.Errorf("%w: directory.Local with the zero Partitioner (make it with queues.NewPartitioner)", grain.ErrInvalidConfig)
	}
	return l.LocateHash(id.Hash()), nil
}

// LocateHash is Locate for an identity whose Hash is h, for callers that
// have computed it already.
func (l Local) LocateHash(h uint64) Location {
	return Location{Silo: l.Silo, Partition: l.Partitioner.PartitionOf(h)}
}
