package queues_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestQueueBatchesAndControlFirst(t *testing.T) {
	q := queues.New[int, string](0)
	require.NoError(t, q.Push(1))
	require.NoError(t, q.Push(2))
	q.PushControl("stop")
	<-q.Wake()
	b, ctl := q.Drain(nil)
	assert.Equal(t, []int{1, 2}, drain(&b))
	assert.Equal(t, []string{"stop"}, ctl)
	assert.Zero(t, q.Len())
	b, ctl = q.Drain(ctl[:0])
	assert.True(t, b.Empty())
	assert.Empty(t, ctl)
}

// DrainInto is Drain into a batch the consumer keeps: the batch it replaces
// — taken whole, or half — leaves nothing behind in it.
func TestDrainIntoReplacesTheBatch(t *testing.T) {
	q := queues.New[int, string](0)
	var b queues.Batch[int, string]
	var ctl []string
	for round := range 3 {
		for i := range 600 { // past a segment
			require.NoError(t, q.Push(round*1000+i))
		}
		q.PushControl("c")
		ctl = q.DrainInto(&b, ctl[:0])
		assert.Equal(t, []string{"c"}, ctl)
		assert.Equal(t, uint64(round+1), b.Seq())
		assert.Zero(t, b.Taken())
		for i := range 300 {
			v, ok := b.Pop()
			require.True(t, ok)
			require.Equal(t, round*1000+i, v)
		}
		if round == 2 {
			rest := drain(&b)
			require.Len(t, rest, 300)
			assert.Equal(t, 2599, rest[299])
		}
		// rounds 0 and 1 leave half their batch: the next DrainInto
		// replaces it, as Drain's result would be
	}
	ctl = q.DrainInto(&b, ctl[:0])
	assert.True(t, b.Empty())
	assert.Empty(t, ctl)
}

// A full lane makes a sender wait for room (SendersWait says so until the
// next Drain), and a control item pushed with messages queued still wakes
// the consumer.
func TestSendersWaitForRoomAndAControlItemWakesTheConsumer(t *testing.T) {
	q := queues.New[int, string](2)
	require.NoError(t, q.Push(1))
	require.NoError(t, q.Push(2))
	require.ErrorIs(t, q.Push(3), queues.ErrFull)
	v := 3
	space, _, err := q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	require.NotNil(t, space, "the lane is full: the sender waits")
	assert.True(t, q.SendersWait())
	select {
	case <-q.Wake(): // the pushes' wake-up, not taken yet
	default:
	}
	q.PushControl("a")
	select {
	case <-q.Wake():
	default:
		t.Fatal("a control item pushed with messages queued woke no consumer")
	}
	select {
	case <-space:
		t.Fatal("room before a Drain")
	default:
	}
	b, ctl := q.Drain(nil)
	assert.Equal(t, []int{1, 2}, drain(&b))
	assert.Equal(t, []string{"a"}, ctl)
	assert.False(t, q.SendersWait())
	<-space // the Drain made room
	_, _, err = q.PushOrWait(&v, space)
	require.NoError(t, err)
	b, _ = q.Drain(nil)
	assert.Equal(t, []int{3}, drain(&b))
}

// A push says whether it found nothing queued ahead of its item: not a
// message, not a control item — until a Drain empties the queue again.
func TestPushSaysWhetherItWasFirst(t *testing.T) {
	q := queues.New[int, string](0)
	v := 1
	_, first, err := q.PushOrWait(&v, nil)
	require.NoError(t, err)
	assert.True(t, first, "an empty queue")
	_, first, err = q.PushOrWait(&v, nil)
	require.NoError(t, err)
	assert.False(t, first, "a message ahead")
	b, _ := q.Drain(nil)
	assert.Equal(t, []int{1, 1}, drain(&b))
	_, first, err = q.PushLateOrWait(&v, nil)
	require.NoError(t, err)
	assert.True(t, first, "drained: empty again")
	b, _ = q.Drain(nil)
	assert.Equal(t, []int{1}, drain(&b))
	q.PushControl("a")
	_, first, err = q.PushOrWait(&v, nil)
	require.NoError(t, err)
	assert.False(t, first, "a control item ahead")
	q.Close()
	_, first, err = q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrClosed)
	assert.False(t, first, "nothing queued")
}

func TestQueueLimitAndClose(t *testing.T) {
	q := queues.New[int, int](2)
	require.NoError(t, q.Push(1))
	require.NoError(t, q.Push(2))
	require.ErrorIs(t, q.Push(3), queues.ErrFull)
	q.Close()
	require.ErrorIs(t, q.Push(4), queues.ErrClosed)
	q.PushControl(9) // the control lane stays open
	b, ctl := q.Drain(nil)
	assert.Equal(t, []int{1, 2}, drain(&b))
	assert.Equal(t, []int{9}, ctl)

	// A nil item is refused, typed, not dereferenced.
	open := queues.New[int, int](0)
	_, _, err := open.PushOrWait(nil, nil)
	require.ErrorIs(t, err, grain.ErrNilMessage)
	_, _, err = open.PushLateOrWait(nil, nil)
	require.ErrorIs(t, err, grain.ErrNilMessage)
	assert.Zero(t, open.Len())
}

// Discard hands back what both lanes hold and closes the queue for good:
// a push to either lane after it — a late control item for a consumer
// that has stopped — is refused or goes nowhere, and the queue stays
// empty.
func TestQueueDiscard(t *testing.T) {
	q := queues.New[int, int](0)
	require.NoError(t, q.Push(1))
	q.PushControl(7)
	q.PushControlAt(func(ahead int) int { return 100 + ahead })
	var b queues.Batch[int, int]
	ctl := q.Discard(&b)
	assert.Equal(t, []int{1}, drain(&b))
	assert.Equal(t, []int{7, 101}, ctl)

	require.ErrorIs(t, q.Push(2), queues.ErrClosed)
	_, _, err := q.PushLateOrWait(new(3), nil)
	require.ErrorIs(t, err, queues.ErrClosed)
	q.PushControl(8)
	q.PushControlAt(func(int) int { t.Fatal("made for a queue discarded"); return 0 })
	q.Close() // closing again leaves it discarded
	q.PushControl(9)
	assert.Zero(t, q.Len())
	b2, ctl2 := q.Drain(nil)
	assert.Empty(t, drain(&b2))
	assert.Empty(t, ctl2)
}

// Many producers, one consumer: nothing lost, per-producer order kept, and
// the consumer never misses a wake-up.
func TestQueueManyProducers(t *testing.T) {
	const producers, each = 8, 5000
	q := queues.New[[2]int, struct{}](0)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				require.NoError(t, q.Push([2]int{p, i}))
			}
		})
	}
	next := make([]int, producers)
	for got := 0; got < producers*each; {
		b, _ := q.Drain(nil)
		items := drain(&b)
		if len(items) == 0 {
			<-q.Wake()
			continue
		}
		for _, it := range items {
			require.Equal(t, next[it[0]], it[1], "per-producer order")
			next[it[0]]++
		}
		got += len(items)
	}
	wg.Wait()
}

func drain[T, C any](b *queues.Batch[T, C]) []T {
	var out []T
	for {
		v, ok := b.Pop()
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

// Batches span many segments, and segments are reused without leaking old
// items into new batches.
func TestQueueSegments(t *testing.T) {
	q := queues.New[int, int](0)
	for round := range 3 {
		for i := range 1000 {
			require.NoError(t, q.Push(round*1000+i))
		}
		b, _ := q.Drain(nil)
		got := drain(&b)
		require.Len(t, got, 1000)
		for i, v := range got {
			require.Equal(t, round*1000+i, v)
		}
	}
}

func TestChain(t *testing.T) {
	a, b := grain.NewID("k", "a"), grain.NewID("k", "b")
	c := queues.Chain{}.Extend(queues.Link{ID: a, Silo: 1})
	d := c.Extend(queues.Link{ID: b, Silo: 1, AllowReentry: true})
	e := c.Extend(queues.Link{ID: a, Silo: 2})
	_, ok := c.Find(1, b)
	assert.False(t, ok)
	l, ok := d.Find(1, b)
	assert.True(t, ok)
	assert.True(t, l.AllowReentry)
	_, ok = d.Find(2, b)
	assert.False(t, ok, "another silo's grain of the same ID waits nowhere in d")
	l, ok = e.Find(2, a)
	assert.True(t, ok)
	assert.Equal(t, uint64(2), l.Silo, "the link of the silo asked for, not the first of that ID")
	assert.Equal(t, []grain.ID{a, a}, e.IDs(), "extensions never share a backing array")
	assert.Equal(t, []grain.ID{a, b}, d.IDs())
}

// A cycle's error names each grain's silo only when the chain passes
// through more than one; silos sharing a name are told apart.
func TestChainCycleNamesTheSilosOfAChainThroughSeveral(t *testing.T) {
	a, b := grain.NewID("k", "a"), grain.NewID("k", "b")
	one := queues.Chain{{ID: a, Silo: 1, SiloName: "eu"}, {ID: b, Silo: 1, SiloName: "eu"}}
	e := one.Cycle(1, "eu", a)
	assert.Equal(t, []grain.ID{a, b, a}, e.Chain)
	assert.Nil(t, e.Silos, "one silo: no names")
	assert.Equal(t, "granary: call cycle: k/a -> k/b -> k/a", e.Error())

	e = one.Cycle(2, "us", b)
	assert.Equal(t, []string{"eu", "eu", "us"}, e.Silos)
	assert.Equal(t, "granary: call cycle: k/a (silo eu) -> k/b (silo eu) -> k/b (silo us)", e.Error())

	// Four silos, three named local — one of them local#2 by its own name
	// — and one with no name at all (a frame from elsewhere).
	many := queues.Chain{{ID: a, Silo: 1, SiloName: "local"}, {ID: a, Silo: 2, SiloName: "local#2"},
		{ID: a, Silo: 3, SiloName: "local"}, {ID: b, Silo: 4}, {ID: b, Silo: 1, SiloName: "local"}}
	e = many.Cycle(3, "local", a)
	assert.Equal(t, []string{"local", "local#2", "local#3", "unnamed", "local", "local#3"}, e.Silos)
	require.ErrorIs(t, e, grain.ErrCallCycle)
}

func TestRequestResolvesOnce(t *testing.T) {
	r := queues.NewRequest(t.Context(), nil)
	r.Resolve(1, nil)
	r.Resolve(2, nil) // never blocks, never replaces
	assert.Equal(t, 1, (<-r.Done()).Value)
}

// Next reads messages in place, in order, across segments; a segment goes
// back to the producers only once Next has moved past it.
func TestBatchNextReadsInPlace(t *testing.T) {
	q := queues.New[int, int](0)
	for i := range 600 {
		require.NoError(t, q.Push(i))
	}
	b, _ := q.Drain(nil)
	for i := range 600 {
		p := b.Next()
		require.NotNil(t, p)
		require.Equal(t, i, *p)
		if i == 255 { // the last of the first segment: still ours
			require.NoError(t, q.Push(-1)) // a producer gets a fresh segment
			require.Equal(t, 255, *p)
		}
	}
	require.Nil(t, b.Next())
	require.True(t, b.Empty())
	b, _ = q.Drain(nil)
	require.Equal(t, []int{-1}, drain(&b))
}

// Peek looks ahead within the current segment without consuming.
func TestBatchPeek(t *testing.T) {
	q := queues.New[int, int](0)
	for i := range 300 {
		require.NoError(t, q.Push(i))
	}
	b, _ := q.Drain(nil)
	require.Equal(t, 0, *b.Peek(0))
	require.Equal(t, 5, *b.Peek(5))
	require.Nil(t, b.Peek(256), "past the first segment")
	require.Equal(t, 0, *b.Next(), "Peek consumed nothing")
	require.Equal(t, 1, *b.Peek(0))
	for range 255 {
		b.Next()
	}
	require.Nil(t, b.Peek(0), "the next message is in the next segment")
	require.Equal(t, 256, *b.Next())
	require.Equal(t, 257, *b.Peek(0), "Peek follows Next into the new segment")
	require.Nil(t, b.Peek(43), "past the last message")
}

// Len counts what a batch has left, across its segments, as Next takes it.
func TestBatchLen(t *testing.T) {
	var zero queues.Batch[int, int]
	assert.Zero(t, zero.Len())
	q := queues.New[int, int](0)
	for i := range 600 { // three segments
		require.NoError(t, q.Push(i))
	}
	b, _ := q.Drain(nil)
	for taken := range 600 {
		require.Equal(t, 600-taken, b.Len(), "after %d taken", taken)
		b.Next()
	}
	assert.Zero(t, b.Len())
	assert.True(t, b.Empty())
}

// A control item pushed with PushControlAt learns how many messages are
// ahead of it; the consumer, which reads it first, finds them as the first
// ones of the batch drained with it, across segments.
func TestControlPositionAndBatchTaken(t *testing.T) {
	q := queues.New[int, int](0)
	const before, after = 300, 10 // more than a segment ahead
	for i := range before {
		require.NoError(t, q.Push(i))
	}
	q.PushControlAt(func(ahead int) int { return ahead })
	for i := range after {
		require.NoError(t, q.Push(before+i))
	}
	b, ctl := q.Drain(nil)
	require.Equal(t, []int{before}, ctl)
	assert.Equal(t, uint64(1), b.Seq())
	for i := range before + after {
		v, ok := b.Pop()
		require.True(t, ok)
		assert.Equal(t, i, v)
		assert.Equal(t, i+1, b.Taken(), "the message just taken is number %d", i)
	}
	assert.True(t, b.Empty())
	b2, _ := q.Drain(nil)
	assert.Equal(t, uint64(2), b2.Seq())
	assert.Zero(t, b2.Taken())
}

// fill pushes n messages and consumes them, so their segments come back as
// spares.
func fill(t *testing.T, q *queues.Queue[int, string], n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, q.Push(i))
	}
	b, _ := q.Drain(nil)
	for range n {
		_, ok := b.Pop()
		require.True(t, ok)
	}
	_, ok := b.Pop()
	require.False(t, ok)
}

// A burst leaves spare segments behind; Trim returns those the queue did
// not draw on since the previous Trim, so a quiet queue gives them all back
// in one period and a busy one keeps what it uses.
func TestTrimReturnsUnusedSpareSegments(t *testing.T) {
	q := queues.New[int, string](0)
	fill(t, q, 40*256) // a burst of 40 segments
	spare := q.Spare()
	require.Greater(t, spare, 30)

	q.Trim() // the first period's low-water mark is unknown: keep all
	assert.Equal(t, spare, q.Spare())
	fill(t, q, 3*256) // steady traffic: draws on a few spares
	q.Trim()
	kept := q.Spare()
	assert.Less(t, kept, spare, "what was not drawn on in the period goes")
	assert.GreaterOrEqual(t, kept, 3, "what the period drew on stays")

	q.Trim() // a quiet period: every spare goes
	assert.Zero(t, q.Spare())
	fill(t, q, 256) // and the queue still works
}

// A consumer of one message a round — two grains telling each other —
// hands its finished segment back at its next Drain, and the producers
// reuse it: a steady state allocates nothing, and keeps two spares.
func TestOneMessageARoundReusesItsSegment(t *testing.T) {
	q := queues.New[int, int](0)
	round := func() {
		require.NoError(t, q.Push(1))
		b, _ := q.Drain(nil)
		_, ok := b.Pop()
		require.True(t, ok)
		require.True(t, b.Empty())
	}
	round()
	assert.Zero(t, testing.AllocsPerRun(100, round))
	assert.Equal(t, 2, q.Spare(), "one handed back at the Drain, one finished since")
}

// fullQueue returns a queue of limit messages, full.
func fullQueue(t *testing.T, limit int) *queues.Queue[int, int] {
	t.Helper()
	q := queues.New[int, int](limit)
	for i := range limit {
		require.NoError(t, q.Push(i))
	}
	return q
}

// A sender woken from its wait for room finds room, held for it by the
// Drain that woke it: a sender pushing in a loop cannot take it first. It
// did before, again and again: beside eight such senders, a grain's ask
// lost the race up to five Drains in a row.
func TestAWokenSenderFindsRoom(t *testing.T) {
	const limit = 4
	q := fullQueue(t, limit)
	v := 100
	space, _, err := q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	b, _ := q.Drain(nil)
	assert.Len(t, drain(&b), limit)
	<-space
	for i := range limit - 1 { // the senders that did not wait
		require.NoError(t, q.Push(10+i))
	}
	require.ErrorIs(t, q.Push(99), queues.ErrFull, "the last room is held for the woken sender")
	_, _, err = q.PushOrWait(&v, space)
	require.NoError(t, err)
	b, _ = q.Drain(nil)
	assert.Equal(t, []int{10, 11, 12, 100}, drain(&b))
	for i := range limit { // all the room is free again
		require.NoError(t, q.Push(i))
	}
}

// A sender that stops waiting gives its place back, before its Drain or
// after: no room stays held for nobody.
func TestGiveUpReturnsTheRoom(t *testing.T) {
	const limit = 3
	q := queues.New[int, int](limit)
	fill := func() {
		t.Helper()
		for i := range limit {
			require.NoError(t, q.Push(i))
		}
		require.ErrorIs(t, q.Push(9), queues.ErrFull)
	}
	fill()
	v := 1
	before, _, err := q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	q.GiveUp(before) // still waiting: counted out of those waiting
	b, _ := q.Drain(nil)
	drain(&b)
	fill()

	after, _, err := q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	b, _ = q.Drain(nil)
	drain(&b)
	<-after
	q.GiveUp(after) // woken: the room held for it is given back
	fill()

	// A nil item on a retry gives the place up too.
	b, _ = q.Drain(nil)
	drain(&b)
	for i := range limit {
		require.NoError(t, q.Push(i))
	}
	nilRetry, _, err := q.PushOrWait(&v, nil)
	require.ErrorIs(t, err, queues.ErrFull)
	b, _ = q.Drain(nil)
	drain(&b)
	<-nilRetry
	_, _, err = q.PushOrWait(nil, nilRetry)
	require.ErrorIs(t, err, grain.ErrNilMessage)
	fill()
}

// Many senders that wait for room, some giving up now and then, and a
// consumer: every item pushed arrives once, and when all is done no room
// is held — the lane takes its limit again.
func TestWaitingSendersUnderLoad(t *testing.T) {
	const senders, each, limit = 8, 3000, 16
	q := queues.New[[2]int, struct{}](limit)
	var wg sync.WaitGroup
	var pushed atomic.Int64
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				v := [2]int{s, i}
				var waited <-chan struct{}
				for {
					space, _, err := q.PushOrWait(&v, waited)
					if err == nil {
						pushed.Add(1)
						break
					}
					require.ErrorIs(t, err, queues.ErrFull)
					if (s+i)%7 == 0 { // gives up: the item is dropped
						q.GiveUp(space)
						break
					}
					<-space
					waited = space
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	got := 0
	for {
		b, _ := q.Drain(nil)
		n := len(drain(&b))
		got += n
		if n > 0 {
			continue
		}
		select {
		case <-q.Wake():
		case <-done:
			b, _ := q.Drain(nil)
			got += len(drain(&b))
			require.EqualValues(t, pushed.Load(), got)
			for i := range limit {
				require.NoError(t, q.Push([2]int{-1, i}), "room held for nobody")
			}
			return
		}
	}
}

// Room held for woken senders that give it up instead wakes the senders
// that came to wait meanwhile: with nothing queued, no Drain would.
func TestRoomGivenUpWakesTheSendersWaiting(t *testing.T) {
	const limit = 2
	q := fullQueue(t, limit)
	v := 1
	var woken []<-chan struct{}
	for range limit {
		space, _, err := q.PushOrWait(&v, nil)
		require.ErrorIs(t, err, queues.ErrFull)
		woken = append(woken, space)
	}
	b, _ := q.Drain(nil)
	drain(&b)
	late, _, err := q.PushOrWait(&v, nil) // all the room is held for the woken
	require.ErrorIs(t, err, queues.ErrFull)
	for _, space := range woken {
		<-space
		q.GiveUp(space)
	}
	<-late // woken by the last give-up, the lane empty
	_, _, err = q.PushOrWait(&v, late)
	require.NoError(t, err)
}

// More senders waiting than the lane holds: the Drain holds room for as
// many as fit, the others find the lane full again and wait for the next.
func TestMoreWaitingSendersThanRoom(t *testing.T) {
	const limit = 2
	q := fullQueue(t, limit)
	var spaces []<-chan struct{}
	for i := range 5 {
		v := 10 + i
		space, _, err := q.PushOrWait(&v, nil)
		require.ErrorIs(t, err, queues.ErrFull)
		spaces = append(spaces, space)
	}
	b, _ := q.Drain(nil)
	drain(&b)
	var again []<-chan struct{}
	for i, space := range spaces {
		<-space
		v := 10 + i
		next, _, err := q.PushOrWait(&v, space)
		if i < limit {
			require.NoError(t, err)
			continue
		}
		require.ErrorIs(t, err, queues.ErrFull)
		again = append(again, next)
	}
	b, _ = q.Drain(nil)
	assert.Equal(t, []int{10, 11}, drain(&b))
	for i, space := range again {
		<-space
		if i == limit {
			q.GiveUp(space) // stops waiting instead of trying again
			continue
		}
		v := 12 + i
		_, _, err := q.PushOrWait(&v, space)
		require.NoError(t, err)
	}
	b, _ = q.Drain(nil)
	assert.Equal(t, []int{12, 13}, drain(&b))
	for i := range limit { // nothing held for nobody
		require.NoError(t, q.Push(i))
	}
	q.GiveUp(nil) // no place: nothing to give back
}

// A control lane's array that a burst grew, passed back empty by the
// consumer, is let go by the next Trim, and counted as spare until then.
func TestTrimLetsABurstsEmptyControlLaneGo(t *testing.T) {
	q := queues.New[int, string](0)
	for range 5_000 {
		q.PushControl("c")
	}
	_, ctl := q.Drain(nil)
	require.Len(t, ctl, 5_000)
	_, got := q.Drain(ctl[:0]) // the burst's array is the lane now
	require.Empty(t, got)
	require.Equal(t, 1, q.Spare(), "the empty lane's array")
	q.Trim()
	assert.Zero(t, q.Spare())
	q.PushControl("after") // the lane works still
	_, got = q.Drain(nil)
	assert.Equal(t, []string{"after"}, got)
}
