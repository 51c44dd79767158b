package activation_test

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/queues"
)

// A mailbox keeps its envelopes in order whatever the mix of pushes and
// pops: against a slice, across the ring's growth, the segments of a long
// backlog, and the first segment taking the ring's place.
func TestMailboxMatchesAFIFOAcrossItsSegments(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var m activation.Mailbox
		var model []int
		next := 0
		for range 1_000 {
			// Long runs of pushes and of pops, so the backlog crosses
			// several segments' worth each way.
			if rng.IntN(1000) < 520 {
				for range rng.IntN(700) {
					m.Push(queues.Envelope{Msg: next})
					model = append(model, next)
					next++
				}
			} else {
				for range rng.IntN(700) {
					e, ok := m.Pop()
					if len(model) == 0 {
						require.False(t, ok)
						break
					}
					if !ok || e.Msg != model[0] {
						t.Fatalf("seed %d: popped %v, %v; want %d", seed, e.Msg, ok, model[0])
					}
					model = model[1:]
				}
			}
			if m.Len() != len(model) {
				t.Fatalf("seed %d: Len %d, want %d", seed, m.Len(), len(model))
			}
		}
		var got []int
		m.Drain(func(e queues.Envelope) { got = append(got, e.Msg.(int)) })
		if len(model) == 0 {
			model = nil
		}
		require.Equal(t, model, got)
		assert.Zero(t, m.Len())
	}
}

// PopFirst removes the oldest envelope its predicate does not keep, and
// leaves those it keeps ahead of it in place, in their order: against a
// slice, with the one removed anywhere from the first place to past the
// first segment, at every head the pushes and pops leave. Find finds what
// is there, in any segment, and nothing else.
func TestPopFirstKeepsWhatItSkipsInOrder(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var m activation.Mailbox
		var model []int
		next := 0
		for range 1_000 {
			switch x := rng.IntN(10); {
			case x < 5:
				for range rng.IntN(200) {
					m.Push(queues.Envelope{Msg: next})
					model = append(model, next)
					next++
				}
			case x < 7:
				for range rng.IntN(100) {
					if _, ok := m.Pop(); !ok {
						break
					}
					model = model[1:]
				}
			case x < 9:
				skip := rng.IntN(300) // keep the first skip, remove the next
				kept := 0
				e, ok := m.PopFirst(func(*queues.Envelope) bool { kept++; return kept <= skip })
				if skip >= len(model) {
					require.False(t, ok, "seed %d: kept all %d", seed, len(model))
					break
				}
				require.True(t, ok)
				require.Equal(t, model[skip], e.Msg, "seed %d", seed)
				model = append(model[:skip:skip], model[skip+1:]...)
			default:
				want := next - rng.IntN(400) // maybe one popped, or none yet
				e := m.Find(func(e *queues.Envelope) bool { return e.Msg == want })
				if !slices.Contains(model, want) {
					require.Nil(t, e, "seed %d: %d is not there", seed, want)
					break
				}
				require.NotNil(t, e, "seed %d: %d", seed, want)
				require.Equal(t, want, e.Msg)
			}
			require.Equal(t, len(model), m.Len(), "seed %d", seed)
		}
		var got []int
		m.Drain(func(e queues.Envelope) { got = append(got, e.Msg.(int)) })
		if len(model) == 0 {
			model = nil
		}
		require.Equal(t, model, got, "seed %d", seed)
	}
}

// A long backlog grows a segment at a time and never by copying what it
// holds: the bytes it allocates are about its envelopes' own. A doubling
// ring allocated twice its final capacity, up to four times the backlog
// (100,000 envelopes: 23 MB against 8.8), copying all of it as it went.
func TestALongBacklogGrowsWithoutCopying(t *testing.T) {
	const n = 100_000
	var m activation.Mailbox
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		m.Push(queues.Envelope{Hash: uint64(i)})
	}
	runtime.ReadMemStats(&after)
	require.Equal(t, n, m.Len())
	const envelope = 88
	perEnvelope := float64(after.TotalAlloc-before.TotalAlloc) / n
	assert.Less(t, perEnvelope, 1.2*envelope, "bytes allocated per envelope pushed")
	for i := range n {
		if e, ok := m.Pop(); !ok || e.Hash != uint64(i) {
			t.Fatalf("popped %d, %v; want %d", e.Hash, ok, i)
		}
	}
	assert.Zero(t, m.Len())
}

// BenchmarkMailboxFill fills a mailbox with a flood's backlog and empties
// it, as a grain sent a burst does; "spared" with the Spares a silo's
// mailboxes share, where each fill takes the rings the last one left.
func BenchmarkMailboxFill(b *testing.B) {
	for _, n := range []int{16, 1_000, 10_000, 100_000} {
		for _, spared := range []bool{false, true} {
			name := strconv.Itoa(n)
			var sp *activation.Spares
			if spared {
				name, sp = name+"/spared", &activation.Spares{}
			}
			b.Run(name, func(b *testing.B) {
				msg := any(&struct{}{})
				for b.Loop() {
					var m activation.Mailbox
					for range n {
						m.PushWith(queues.Envelope{Msg: msg}, sp)
					}
					for range n {
						m.PopWith(sp)
					}
				}
			})
		}
	}
}
