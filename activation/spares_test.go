package activation_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/queues"
)

// Mailboxes that share one Spares keep each its own envelopes in order
// while the rings one empties go on to the others' backlogs: against a
// slice each, through growth, chains and Drain.
func TestMailboxesSharingSparesStayFIFO(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 13))
		var sp activation.Spares
		var boxes [4]activation.Mailbox
		var models [4][]int
		next := 0
		for range 2_000 {
			i := rng.IntN(len(boxes))
			m := &boxes[i]
			switch x := rng.IntN(10); {
			case x < 5:
				for range rng.IntN([]int{3, 40, 300, 900}[rng.IntN(4)]) {
					m.PushWith(queues.Envelope{Msg: next}, &sp)
					models[i] = append(models[i], next)
					next++
				}
			case x < 9:
				for range rng.IntN(400) {
					e, ok := m.PopWith(&sp)
					if len(models[i]) == 0 {
						require.False(t, ok)
						break
					}
					require.True(t, ok)
					require.Equal(t, models[i][0], e.Msg, "seed %d box %d", seed, i)
					models[i] = models[i][1:]
				}
			default:
				var got []int
				m.DrainWith(func(e queues.Envelope) { got = append(got, e.Msg.(int)) }, &sp)
				if len(models[i]) == 0 {
					models[i] = nil
				}
				require.Equal(t, models[i], got, "seed %d box %d", seed, i)
				models[i] = nil
			}
			require.Equal(t, len(models[i]), m.Len(), "seed %d box %d", seed, i)
		}
	}
}
