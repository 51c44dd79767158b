package activation

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/queues"
)

// A spare ring holds no message — each place was cleared as its envelope
// left, and grow clears the buffer it gives up — and nothing of the
// mailbox or chain it was in, so a spare keeps no message from the GC and
// a new backlog starts clean.
func TestASpareRingHoldsNothing(t *testing.T) {
	var sp Spares
	for _, n := range []int{1, 3, 100, 256, 257, 1_000} {
		var m Mailbox
		for i := range n {
			m.PushWith(queues.Envelope{Msg: &i, Hash: uint64(i)}, &sp)
		}
		for range n / 2 {
			m.PopWith(&sp)
		}
		m.DrainWith(func(queues.Envelope) {}, &sp)
		require.Nil(t, m.r)
	}
	seen := 0
	for size := 2; size <= segLen; size *= 2 {
		for r := sp.take(size); r != nil; r = sp.take(size) {
			seen++
			require.Len(t, r.buf, size)
			require.Zero(t, r.head)
			require.Zero(t, r.n)
			require.Nil(t, r.next)
			require.Nil(t, r.tail)
			require.Zero(t, r.idx)
			for i := range r.buf {
				require.Equal(t, queues.Envelope{}, r.buf[i], "ring of %d, place %d", size, i)
			}
		}
	}
	require.NotZero(t, seen, "spares kept")
}

// A nil *Spares keeps nothing and gives nothing: a mailbox without spares
// allocates and lets go as it always has.
func TestNilSparesKeepNothing(t *testing.T) {
	var sp *Spares
	require.Nil(t, sp.take(2))
	sp.put(&ring{buf: make([]queues.Envelope, 2)}) // no panic, nothing kept
	r := sp.first()
	require.Len(t, r.buf, 2)
}
