package silo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// aheadBit is the bit of the owner's look (runAhead) an identity's
// messages mark.
func aheadBit(id grain.ID) uint64 { return id.Hash() >> 56 }

// A batch of messages from outside — a "go" for grain a, a "joined" for
// room c, ten more for other grains — queued while the partition's one
// owner was busy, so that its next drain reads them as one batch. a's
// turn tells c "moved", then calls d. The call to d, the next hop of work
// under way, runs ahead of the messages from outside; "moved" does not
// pass "joined", queued before it for the same grain.
func TestWorkUnderWayRunsAheadButNeverPastItsGrainsEarlierMessages(t *testing.T) {
	s, err := New(Config{Partitions: 1, HandoffThreshold: 10 * time.Second})
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		handled []string
		done    sync.WaitGroup
	)
	record := func(what string) {
		mu.Lock()
		handled = append(handled, what)
		mu.Unlock()
	}
	gate, gated := make(chan struct{}), make(chan struct{})
	// Keys whose messages mark different bits: the look would otherwise
	// keep d's call in its place, as it keeps any message whose bit an
	// earlier one marked.
	used := map[uint64]bool{}
	key := func(prefix string) string {
		for i := 0; ; i++ {
			k := fmt.Sprintf("%s%d", prefix, i)
			if b := aheadBit(grain.NewID("g", k)); !used[b] {
				used[b] = true
				return k
			}
		}
	}
	a, c, d := grain.NewID("g", key("a")), grain.NewID("g", key("c")), grain.NewID("g", key("d"))
	var others []grain.ID
	for range 10 {
		others = append(others, grain.NewID("g", key("x")))
	}
	require.NoError(t, Register(s, "g", func(id grain.ID) grain.Func {
		return func(ctx context.Context, gc *grain.Context, msg any) (any, error) {
			switch msg {
			case "gate":
				close(gated)
				<-gate
				return nil, nil
			case "go": // a's turn: a tell to c, then a call to d
				if err := gc.Silo().Tell(ctx, c, "moved"); err != nil {
					return nil, err
				}
				_, err := gc.Silo().Ask(ctx, d, "ping")
				record("a's call answered")
				done.Done()
				return nil, err
			}
			record(gc.ID().Key() + ":" + msg.(string))
			if msg != "ping" {
				done.Done()
			}
			return nil, nil
		}
	}))
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()

	require.NoError(t, s.Tell(ctx, grain.NewID("g", "gate"), "gate"))
	// Only once the owner is in the gate's turn: a drain that came while
	// the messages below were being sent would split them over two
	// batches, and a message delivered before the owner's look is behind
	// it, not passed by it ("joined" delivered with the gate's batch, then
	// "moved" and the call run ahead of the ten in the next: legitimate,
	// and 1 % of the runs once failed so).
	<-gated
	done.Add(3 + len(others))
	require.NoError(t, s.Tell(ctx, a, "go"))
	require.NoError(t, s.Tell(ctx, c, "joined"))
	for _, x := range others {
		require.NoError(t, s.Tell(ctx, x, "tell"))
	}
	close(gate)
	done.Wait()

	mu.Lock()
	defer mu.Unlock()
	place := map[string]int{}
	for i, h := range handled {
		place[h] = i
	}
	ping, joined, moved := place[d.Key()+":ping"], place[c.Key()+":joined"], place[c.Key()+":moved"]
	assert.Less(t, ping, joined, "a's call to d ran ahead of the messages from outside queued before it: %v", handled)
	assert.Less(t, ping, place[others[0].Key()+":tell"], "%v", handled)
	assert.Less(t, joined, moved, "c's messages in the order they were pushed: %v", handled)
}

// What a partition says it has left to deliver counts no slot a message
// ran ahead of.
func TestTheBatchLeftCountsNoSlotThatRanAhead(t *testing.T) {
	p, _ := ownedPartition(t, t.Context(), Config{})
	for i := range 300 { // two segments
		id := grain.NewIntID("k", int64(i))
		require.NoError(t, p.q.Push(queues.Envelope{Target: id, Hash: id.Hash(), Msg: i}))
	}
	p.ctls = p.q.DrainInto(&p.batch, p.ctls[:0])
	p.batch.Next()
	assert.Equal(t, 299, p.batchLeft())
	p.batch.Ahead(0, 300, func(env *queues.Envelope) bool {
		if env.Msg.(int)%100 == 50 {
			env.Msg = nil // ran ahead
		}
		return true
	})
	assert.Equal(t, 296, p.batchLeft(), "slots 50, 150 and 250 emptied")
	assert.Equal(t, 299, p.batch.Len(), "the batch's own count is of slots")
}
