package queues_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// The mapping is the high word of Hash × N: pinned, in range at the
// extremes, and agreeing with Partition.
func TestPartitionOfIsMultiplyShift(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64, 1000} {
		p, err := queues.NewPartitioner(n)
		require.NoError(t, err)
		assert.Equal(t, 0, p.PartitionOf(0))
		assert.Equal(t, n-1, p.PartitionOf(math.MaxUint64))
		assert.Equal(t, n/2, p.PartitionOf(1<<63), "half way")
		id := grain.NewID("player", "42")
		assert.Equal(t, p.PartitionOf(id.Hash()), p.Partition(id))
	}
	p, err := queues.NewPartitioner(3)
	require.NoError(t, err)
	assert.Equal(t, 1, p.PartitionOf(0x5555_5555_5555_5556), "pinned: just past a third")
	assert.Equal(t, 0, p.PartitionOf(0x5555_5555_5555_5555), "pinned: just below")
}

// Sequential int keys and string keys spread evenly: every partition
// within 3 % of its share.
func TestPartitionsAreEven(t *testing.T) {
	const n, per = 7, 20_000
	p, err := queues.NewPartitioner(n)
	require.NoError(t, err)
	var ints, strs [n]int
	for k := range n * per {
		ints[p.Partition(grain.NewIntID("player", int64(k)))]++
		strs[p.Partition(grain.NewID("cart", string(rune('a'+k%26))+string(rune('a'+k/26%26))+string(rune('0'+k/676))))]++
	}
	for i := range n {
		assert.InDelta(t, per, ints[i], per*0.03, "int keys, partition %d", i)
		assert.InDelta(t, per, strs[i], per*0.03, "string keys, partition %d", i)
	}
}

func TestNewPartitionerRefusesNone(t *testing.T) {
	_, err := queues.NewPartitioner(0)
	assert.ErrorIs(t, err, grain.ErrInvalidConfig)
}
