package silo

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// bucketOf orders slacks (never a larger slack in a smaller bucket), stays
// within the histogram, and tells apart slacks 1 % apart.
func TestBucketOfOrdersSlacks(t *testing.T) {
	prev := bucketOf(math.MinInt64)
	require.Zero(t, prev)
	for _, d := range []int64{-1, 0, 1, 127, 128, 129, 255, 256, 1000, 1 << 40, math.MaxInt64 / 2, math.MaxInt64} {
		b := bucketOf(d)
		require.GreaterOrEqual(t, b, prev, "slack %d", d)
		require.Less(t, b, shedBuckets, "slack %d", d)
		prev = b
	}
	for d := int64(128); d < math.MaxInt64/101; d = d*101/100 + 1 {
		require.Less(t, bucketOf(d), bucketOf(d*101/100+1), "slack %d", d)
	}
}
