package silo

import (
	"math"
	"runtime"
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

// The default gauge reads metrics that exist: after a GC, a live heap, a
// heap at least as large, and a count of GCs that a GC moves on.
func TestHeapGaugeReadsTheRuntime(t *testing.T) {
	runtime.GC()
	a := heapGauge{}.read()
	require.NotZero(t, a.live)
	require.GreaterOrEqual(t, a.now, a.live/2)
	require.NotZero(t, a.gcs)
	runtime.GC()
	require.Greater(t, heapGauge{}.read().gcs, a.gcs)
	require.Equal(t, heapGauge{}.read().live, heapGauge{}.MemoryInUse())
}
