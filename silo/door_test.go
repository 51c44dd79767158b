package silo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// heldSilo starts, in the current synctest bubble, a silo of one partition
// whose "busy" grains take a millisecond a turn, their backlog limited to
// limit, and a goroutine telling the grain "hot" n times as fast as it
// can. It returns the silo, the turns done, and a channel that has the
// refusals once the sender is done.
func heldSilo(t *testing.T, limit, n int) (*silo.Silo, *atomic.Int64, chan int) {
	s, done := busySilo(t, silo.Config{Partitions: 1, QueueCapacity: 64}, time.Millisecond, silo.WithMaxBacklog(limit, silo.RejectNewest))
	refused := make(chan int, 1)
	go func() {
		r := 0
		for i := range n {
			if err := s.Tell(context.Background(), grain.NewID("busy", "hot"), i); err != nil {
				r++
			}
		}
		refused <- r
	}()
	for s.Stats().BacklogHolds == 0 {
		time.Sleep(time.Millisecond) // the bubble's clock: the hot grain works meanwhile
	}
	return s, done, refused
}

// A grain sent messages faster than it handles them holds its own senders
// at its door once its backlog is full, and no one else: another grain of
// its partition answers at once. Its partition's queue was held instead,
// every sender of the partition waiting until the hot grain's backlog had
// room — past its limit by what the queue held: an ask to a neighbour
// waited 31–132 ms here (and 340–690 ms beside a grain of 20 µs turns sent
// 50,000 tells a second; 0.1 ms at the median now).
func TestAHeldGrainHoldsOnlyItsOwnSenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, n = 8, 300
		s, done, refused := heldSilo(t, limit, n)
		for range 5 {
			start := time.Now()
			_, err := s.Ask(t.Context(), grain.NewID("busy", "other"), "work")
			require.NoError(t, err)
			// Its own turn, and the hot grain's turn under way and its
			// share of the round.
			assert.LessOrEqual(t, time.Since(start), 10*time.Millisecond, "the neighbour's ask waited")
			time.Sleep(5 * time.Millisecond)
		}
		require.Zero(t, <-refused, "a held grain's senders wait; none is refused")
		_, err := s.Ask(t.Context(), grain.NewID("busy", "hot"), "last")
		require.NoError(t, err)
		assert.Equal(t, int64(n+1+5), done.Load())
		st := s.Stats()
		assert.NotZero(t, st.BacklogWaits, "the hot grain's sender waited at its door")
		assert.Equal(t, uint64(1), st.BacklogHolds, "one hold: it lasts while the grain is kept at its limit")
	})
}

// A held grain lets in as many senders as its backlog has room for each
// round, so its backlog stays near its limit: past it by what the queue
// held when the hold began, then by a round's room at most. Let in
// whenever it had room, its senders refilled the queue while the owner
// worked through a round, and a limit of 1,000 held 17,000–31,000.
func TestAHeldGrainsBacklogStaysNearItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, n = 8, 400
		s, _, refused := heldSilo(t, limit, n)
		// What the queue held as the hold began goes first: up to two
		// queues' worth (one delivered, one let in meanwhile).
		time.Sleep(150 * time.Millisecond)
		most := 0
		for range 100 {
			most = max(most, s.Stats().Backlog[0])
			time.Sleep(time.Millisecond)
		}
		assert.LessOrEqual(t, most, 2*limit, "the backlog, once held")
		require.Zero(t, <-refused)
	})
}

// A sender waiting at a held grain's door waits as long as its ctx allows:
// then its send fails with ErrOverloaded, its ctx's error wrapped, and the
// message is a dead letter.
func TestASenderAtAHeldGrainsDoorGivesUpWithItsCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, refused := heldSilo(t, 8, 400)
		// What the queue held as the hold began goes first: then the door
		// lets in no more than the backlog has room for, and no send
		// waits for room in the queue instead.
		time.Sleep(150 * time.Millisecond)
		dl := s.SubscribeDeadLetters(8)
		defer dl.Cancel()
		ctx, cancel := context.WithTimeout(t.Context(), time.Microsecond)
		defer cancel()
		for range 100 { // the first that finds the door shut waits, and gives up
			err := s.Tell(ctx, grain.NewID("busy", "hot"), "late")
			if err == nil {
				continue
			}
			require.ErrorIs(t, err, grain.ErrOverloaded)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), "busy/hot")
			d := <-dl.C
			assert.Equal(t, grain.ReasonOverload, d.Reason)
			assert.Equal(t, "late", d.Msg)
			require.Zero(t, <-refused)
			return
		}
		t.Fatal("no send waited at the door")
	})
}

// A sender waiting at a held grain's door is let go by a Close, with
// ErrSiloClosed: it does not wait for a grain that will not run again.
func TestASenderAtAHeldGrainsDoorIsReleasedByClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, _ := heldSilo(t, 8, 1000)
		for s.Stats().BacklogWaits == 0 {
			time.Sleep(time.Millisecond)
		}
		const late = 20 // more than the door's budget: most wait
		waiting := make(chan error, late)
		for range late {
			go func() { waiting <- s.Tell(context.Background(), grain.NewID("busy", "hot"), "late") }()
		}
		synctest.Wait() // they wait at the door, with the hot grain's own sender
		require.NoError(t, s.Close())
		closed := 0
		for range late {
			if err := <-waiting; err != nil {
				require.ErrorIs(t, err, grain.ErrSiloClosed)
				closed++
			}
		}
		assert.NotZero(t, closed, "none was waiting at the door")
	})
}
