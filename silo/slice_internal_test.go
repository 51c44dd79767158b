package silo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// othersWait stops a run of ready steps once they have run stepShare and
// something waits in the queue: neither alone. It reads the clock after
// each step while steps are slow, and less often while they are cheap.
func TestOthersWaitNeedsBothTheShareAndWaitingWork(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	p := s.parts[0] // not started: nothing drains its queue
	c := stepClock{next: 1}
	require.False(t, p.othersWait(&c, 0), "not its step to read")
	require.True(t, c.from.IsZero())
	require.False(t, p.othersWait(&c, 1), "the first reading starts the clock")
	require.False(t, c.from.IsZero())
	require.Equal(t, 2, c.next)

	p.q.PushControl(ctl{})
	c.from = time.Now().Add(-stepShare / 2) // one slow step
	require.False(t, p.othersWait(&c, 2), "something waits, but the share has not run")
	require.Equal(t, 3, c.next, "slow steps: read after the next")
	c.from = time.Now().Add(-stepShare)
	require.True(t, p.othersWait(&c, 3), "the share has run, and something waits")

	p.ctls = p.q.DrainInto(&p.batch, p.ctls[:0])
	require.False(t, p.othersWait(&c, 3), "the share has run, but nothing waits")

	cheap := stepClock{next: 1}
	require.False(t, p.othersWait(&cheap, 1))
	require.False(t, p.othersWait(&cheap, 1+maxStride)) // however fast it ran
	require.Greater(t, cheap.next, 1+maxStride+1, "cheap steps: read less often")
	require.LessOrEqual(t, cheap.next, 1+2*maxStride)
}

// A flood's steps may run as long as the round's deliveries ran before them
// (partition.delivered, timed when grains waited ready from the round
// before), stepShare at least: a hot grain of a busy partition is not held
// to 200 µs of steps for every few milliseconds of the other grains'
// deliveries.
func TestAFloodsShareIsAsLongAsTheDeliveries(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	p := s.parts[0] // not started: nothing drains its queue
	p.q.PushControl(ctl{})
	share := func(delivered time.Duration) time.Duration {
		p.delivered = delivered
		c := stepClock{next: 1}
		require.False(t, p.othersWait(&c, 1), "the first reading starts the clock")
		return c.share
	}
	require.Equal(t, stepShare, share(0), "deliveries not timed: the floor")
	require.Equal(t, stepShare, share(stepShare/4), "short deliveries: the floor")
	d := share(2 * time.Millisecond)
	require.GreaterOrEqual(t, d, 2*time.Millisecond, "as long as the deliveries")
	require.Less(t, d, time.Second)

	c := stepClock{next: 1}
	p.delivered = 2 * time.Millisecond
	require.False(t, p.othersWait(&c, 1))
	c.from = time.Now().Add(-stepShare)
	require.False(t, p.othersWait(&c, 2), "something waits, but the steps have run less than the deliveries")
	c.from = time.Now().Add(-c.share)
	require.True(t, p.othersWait(&c, c.next), "the steps have run as long as the deliveries, and something waits")
}

// A long round defers only the grains the monitor's looks fell in: the
// grain whose message was running when a look came is blamed, and once
// the round has had its slice its further messages wait for its step;
// the other grains that ran a message this round still run theirs as they
// come. Deferring every grain that ran in a long round sent a busy
// partition's whole traffic through mailboxes, and a hot grain among them
// fell behind (TestAHotKeyOfABusyPartitionKeepsPace). The looks are
// counted by hand here: no monitor runs.
func TestALongRoundDefersOnlyTheGrainsTheLooksFellIn(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	p := s.parts[0] // not started: no monitor, no owner
	look := func() { s.dog.looks.Add(1) }
	p.round += 2
	p.sliceAt, p.lastRan = s.dog.looks.Load(), nil
	p.lookSeen = p.sliceAt
	hot, cold, late := &act{}, &act{}, &act{}

	p.ranInline(cold)
	p.ranInline(hot)
	look() // falls in hot's turn
	p.ranInline(cold)
	require.False(t, p.overSlice(hot), "blamed, but the round has not had its slice")
	p.ranInline(hot)
	p.ranInline(cold)
	p.ranInline(late)
	look() // falls in late's turn; the round has had its slice
	require.True(t, p.overSlice(hot), "blamed by the first look")
	require.False(t, p.overSlice(cold), "ran this round, but no look fell in its turns")
	p.ranInline(cold) // the look is seen: late is blamed
	require.True(t, p.overSlice(late), "blamed by the second look")
	require.False(t, p.overSlice(cold))
	require.False(t, p.overSlice(&act{}), "not run this round")

	p.round += 2 // the next round: the blame was this round's
	p.sliceAt = s.dog.looks.Load()
	look()
	look()
	require.False(t, p.overSlice(hot), "blamed in the round before only")
}
