package queues

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/grain"
)

// Errors returned by Push.
var (
	// ErrClosed: the message lane is closed.
	ErrClosed = errors.New("granary: queue closed")
	// ErrFull: the message lane holds its limit.
	ErrFull = errors.New("granary: queue full")
	// errNilItem: a push of a nil *T, which holds no item to copy in.
	errNilItem = fmt.Errorf("granary: queue push of a nil item: %w", grain.ErrNilMessage)
)

// segSize is the number of items in one segment of the message lane.
const segSize = 256

// maxFree is how many empty segments a queue keeps for reuse; beyond that
// they go to the GC. Trim returns those a quiet queue no longer draws on,
// so a flood does not pin memory for ever.
const maxFree = 64

// maxRetired is how many segments the consumer finishes before it hands
// them back to the producers under the lock; its next Drain hands back
// fewer.
const maxRetired = 8

type segment[T any] struct {
	items [segSize]T
	n     int
	next  *segment[T]
}

// Queue is a multi-producer, single-consumer queue with two lanes: a control
// lane of C, always drained first, and a message lane of T. Producers append
// under a mutex held for a few instructions. The message lane is a chain of
// fixed-size segments: appending never copies what is queued, and the
// consumer takes the whole chain in one lock acquisition (batch draining),
// handing emptied segments back for reuse, so a steady state allocates
// nothing. It hands them back a few at a time, and at its next Drain, under
// the lock it takes then: a consumer of one message a round (two grains
// telling each other) took the lock three times a message, now twice.
//
// Queue is safe for concurrent use by many producers and one consumer.
// Drain, Trim, Spare and a Batch are the consumer's.
type Queue[T, C any] struct {
	// What a push reads and writes, in the first 64 bytes: a queue is
	// allocated in a 192-byte size class, so they are one cache line.
	mu    sync.Mutex
	tail  *segment[T]
	n     int
	room  int   // limit - reserved: what a push that did not wait may fill
	tailN int32 // the tail segment's items: its n, kept here while it is the tail
	gate  gate
	idle  bool // restricted and found empty by MarkIdle; cleared by the next push
	ctl   []C

	head    *segment[T]
	free    *segment[T]
	nfree   int
	lowFree int           // the fewest spare segments since the last Trim
	busy    *atomic.Int64 // the restricted queues of a set not idle (Restrict)
	limit   int           // math.MaxInt: no limit
	wake    chan struct{}
	space   chan struct{} // closed by the next Drain; made when a push finds the lane full
	drains  uint64
	// Room for the senders that wait (PushOrWait): waiting counts those
	// waiting on space; a Drain that closes it holds as much room for them
	// (reserved) until each has tried again or given up. Without it, a
	// sender that pushes in a loop refilled the lane before a woken one ran:
	// a grain's ask beside eight such senders lost the race up to five
	// Drains in a row (TestAWokenSenderFindsRoom).
	waiting, reserved int
	// placed counts the control lane's items that PushControlAt placed
	// among the messages: while one waits, DrainAppend takes nothing.
	placed int

	// the consumer's: segments its batches finished, not yet handed back
	retired  *segment[T]
	nretired int

	// to 192 bytes on 64-bit platforms, a size class whose objects begin
	// on a cache line (TestAQueuesPushFieldsShareOneCacheLine)
	_ [16]byte
}

// New returns an empty queue whose message lane holds at most limit items
// (no limit if limit <= 0). The control lane has no limit: it carries the
// runtime's own bounded traffic.
func New[T, C any](limit int) *Queue[T, C] {
	if limit <= 0 {
		limit = math.MaxInt
	}
	return &Queue[T, C]{wake: make(chan struct{}, 1), limit: limit, room: limit}
}

// gate says which pushes the message lane takes.
type gate uint8

const (
	gateOpen       gate = iota
	gateRestricted      // PushLate only
	gateClosed
	gateGone // closed, its consumer gone for good: control items go nowhere either (Discard)
)

// Push appends v to the message lane, or fails with ErrClosed or ErrFull.
func (q *Queue[T, C]) Push(v T) error {
	_, _, err := q.push(&v, false, false, nil)
	return err
}

// PushOrWait is Push for a sender that waits for room: when the lane is
// full, it also returns a channel closed by the consumer's next Drain, and
// counts the sender among those waiting. That Drain holds room for each of
// them, which no other push takes: the sender tries again once the channel
// is closed, passing it as waited (nil on a first try), and finds its room
// — or gives it up with GiveUp if it stops waiting. The channel is taken
// under the same lock as the failed push, so no Drain can slip between the
// two and leave the caller waiting for nothing. *v is copied into the queue
// (a pointer, so a large T is copied once, not twice).
//
// first reports that a push which queued v found nothing queued ahead of
// it, no message and no control item: the consumer was signalled for it,
// and reads it first. A sender that waits on its item's outcome can tell
// from it how soon that may come (the silo's callers: yield.go).
func (q *Queue[T, C]) PushOrWait(v *T, waited <-chan struct{}) (space <-chan struct{}, first bool, err error) {
	return q.push(v, false, true, waited)
}

// PushLateOrWait is PushOrWait for a push that a restricted queue still
// takes (see Restrict); only Close refuses it.
func (q *Queue[T, C]) PushLateOrWait(v *T, waited <-chan struct{}) (space <-chan struct{}, first bool, err error) {
	return q.push(v, true, true, waited)
}

// GiveUp gives back the place of a sender that stops waiting for room:
// waited is the channel its last PushOrWait or PushLateOrWait returned with
// ErrFull, closed or not.
func (q *Queue[T, C]) GiveUp(waited <-chan struct{}) {
	if waited == nil {
		return // it held no place
	}
	q.mu.Lock()
	q.leave(waited)
	q.roomFreed()
	q.mu.Unlock()
}

// roomFreed wakes the senders waiting if room held for others is free
// again and the lane has it: with nothing queued, no Drain would come to
// wake them. q.mu is held.
func (q *Queue[T, C]) roomFreed() {
	if q.space != nil && q.n < q.room {
		q.releaseWaiters()
	}
}

// leave counts out a sender that waited on ch: still waiting if ch is the
// open channel, else one the room was held for. q.mu is held.
func (q *Queue[T, C]) leave(ch <-chan struct{}) {
	if q.space != nil && ch == (<-chan struct{})(q.space) {
		q.waiting = max(q.waiting-1, 0)
	} else if q.reserved > 0 {
		q.reserved--
		q.room++
	}
}

func (q *Queue[T, C]) push(v *T, late, wait bool, waited <-chan struct{}) (<-chan struct{}, bool, error) {
	if v == nil {
		if waited != nil {
			q.GiveUp(waited)
		}
		return nil, false, errNilItem
	}
	q.mu.Lock()
	if waited != nil {
		q.leave(waited) // its room, if held, is for this push
	}
	if q.gate != gateOpen {
		if !late || q.gate >= gateClosed {
			if waited != nil {
				q.roomFreed()
			}
			q.mu.Unlock()
			return nil, false, ErrClosed
		}
		q.wakeIdle()
	}
	if q.n >= q.room {
		if !wait {
			q.mu.Unlock()
			return nil, false, ErrFull
		}
		if q.space == nil {
			q.space = make(chan struct{})
		}
		space := q.space
		q.waiting++
		q.mu.Unlock()
		return space, false, ErrFull
	}
	signal := q.n == 0 && len(q.ctl) == 0
	t := q.tail
	if t == nil || q.tailN == segSize {
		s := q.free
		if s != nil {
			q.free, s.next = s.next, nil
			q.nfree--
			q.lowFree = min(q.lowFree, q.nfree)
		} else {
			s = new(segment[T])
		}
		if t == nil {
			q.head = s
		} else {
			t.n, t.next = segSize, s
		}
		q.tail, t, q.tailN = s, s, 0
	}
	t.items[q.tailN] = *v
	q.tailN++
	q.n++
	q.mu.Unlock()
	if signal {
		q.signal()
	}
	return nil, signal, nil
}

// PushControl appends c to the control lane, which the consumer drains ahead
// of the message lane. The control lane never closes: the runtime's own
// messages (a finished turn, a timer) must reach the consumer until it stops
// — and once it has (Discard), c goes nowhere.
// The first item since a drain signals the consumer, messages queued or
// not: a signal to a consumer already awake costs nothing.
func (q *Queue[T, C]) PushControl(c C) {
	q.mu.Lock()
	if q.gate == gateGone {
		q.mu.Unlock()
		return
	}
	q.wakeIdle()
	signal := len(q.ctl) == 0
	q.ctl = append(q.ctl, c)
	q.mu.Unlock()
	if signal {
		q.signal()
	}
}

// PushControlAt is PushControl for an item that must know where it stands
// among the messages: mk gets, under the queue's lock, how many messages
// are queued ahead of it. The Drain that takes the item takes those
// messages as the first ones of its Batch (see Batch.Taken), so the
// consumer can tell the messages sent before the item from those sent
// after, though it reads the item first. mk must not be nil.
func (q *Queue[T, C]) PushControlAt(mk func(ahead int) C) {
	q.mu.Lock()
	if q.gate == gateGone {
		q.mu.Unlock()
		return
	}
	q.wakeIdle()
	signal := len(q.ctl) == 0 // as PushControl
	q.ctl = append(q.ctl, mk(q.n))
	q.placed++
	q.mu.Unlock()
	if signal {
		q.signal()
	}
}

func (q *Queue[T, C]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Wake returns a channel that receives after a push to an empty queue. The
// consumer waits on it when Drain returned nothing. A wake-up may be
// spurious; none is lost.
func (q *Queue[T, C]) Wake() <-chan struct{} { return q.wake }

// Drain takes every queued item: the messages as a Batch, the control items
// as a slice. ctl is an emptied slice that becomes the new control lane
// (pass back the previous result, cleared, to reuse its array).
func (q *Queue[T, C]) Drain(ctl []C) (Batch[T, C], []C) {
	var b Batch[T, C]
	got := q.DrainInto(&b, ctl)
	return b, got
}

// DrainInto is Drain writing the Batch into *b, which it replaces: a
// consumer that keeps its batch in a struct field saves the copy of a
// returned one (whose words, stored one by one and read back in pairs,
// stall the CPU's store forwarding).
func (q *Queue[T, C]) DrainInto(b *Batch[T, C], ctl []C) []C {
	q.mu.Lock()
	q.handBack()
	q.drains++
	b.q, b.seg, b.last, b.i, b.past, b.seq = q, q.head, q.tail, 0, 0, q.drains
	if q.tail != nil {
		q.tail.n = int(q.tailN)
	}
	gotCtl := q.ctl
	q.head, q.tail, q.n, q.tailN = nil, nil, 0, 0
	q.ctl, q.placed = ctl[:0], 0
	q.releaseWaiters()
	q.mu.Unlock()
	return gotCtl
}

// DrainAppend is a Drain of messages in the middle of a Batch: it takes
// the queued messages onto the end of b, which its consumer is still
// reading, and reports whether it did. The appended messages keep b's Seq
// and follow its others in Taken's count, as if one Drain had taken them
// all. Control items stay queued for the next Drain, and none is passed:
// while an item PushControlAt placed waits, DrainAppend takes nothing and
// reports false, since that item counts its place among the messages of
// the Drain that takes it. Room it frees goes to waiting senders, as a
// Drain's does.
//
// Its cost does not grow with b: it links the queued segments after b's
// last, which b keeps, or — a few messages that fit in the room b's last
// segment has left — copies them there, and the queue keeps its segment.
// A consumer appends often while its batch is long (the silo's owner, at
// every turn that sent a message, through a backlog): walking b's chain
// to its end at each append made a backlog of 30,000 calls cost 1.5 s of
// CPU, and linking a segment for each append's two or three messages left
// a chain of near-empty 22 KB segments, each zeroed when made.
func (q *Queue[T, C]) DrainAppend(b *Batch[T, C]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.placed > 0 {
		return false
	}
	if q.head == nil {
		return true
	}
	if l := b.last; b.seg != nil && q.head == q.tail && int(q.tailN) <= min(segSize-l.n, maxAppendCopy) {
		k := int(q.tailN)
		copy(l.items[l.n:l.n+k], q.head.items[:k])
		clear(q.head.items[:k])
		l.n += k
		q.n, q.tailN = 0, 0
		q.releaseWaiters()
		return true
	}
	q.handBack()
	q.tail.n = int(q.tailN)
	if b.seg == nil {
		b.q, b.seg, b.i = q, q.head, 0
	} else {
		b.last.next = q.head
	}
	b.last = q.tail
	q.head, q.tail, q.n, q.tailN = nil, nil, 0, 0
	q.releaseWaiters()
	return true
}

// maxAppendCopy is the most messages DrainAppend copies into its batch's
// last segment rather than linking theirs: a copy made holding the lock,
// which the producers wait for, is kept short.
const maxAppendCopy = 32

// SendersWait reports whether a sender waits for room in the message lane:
// a PushOrWait or PushLateOrWait found it full since the last Drain.
func (q *Queue[T, C]) SendersWait() bool {
	q.mu.Lock()
	w := q.space != nil
	q.mu.Unlock()
	return w
}

// Len returns the number of queued messages and control items.
func (q *Queue[T, C]) Len() int {
	q.mu.Lock()
	n := q.n + len(q.ctl)
	q.mu.Unlock()
	return n
}

// Close makes further Push and PushLate calls fail with ErrClosed. Items
// already queued stay for Drain; PushControl still works.
func (q *Queue[T, C]) Close() {
	q.mu.Lock()
	q.gate = max(q.gate, gateClosed)
	q.idle = false     // counted no more
	q.releaseWaiters() // they retry, and find the lane closed
	q.mu.Unlock()
	q.signal()
}

// Discard is Close for a consumer that has stopped for good: it also makes
// the control lane drop what is pushed from now on, and it returns what
// both lanes held — the messages as a Batch written into *b, the control
// items as a slice — so that a queue no one reads holds nothing, and keeps
// nothing alive, however late a push comes.
func (q *Queue[T, C]) Discard(b *Batch[T, C]) []C {
	q.mu.Lock()
	q.gate = gateGone
	q.releaseWaiters() // they retry, and find the lane closed
	q.mu.Unlock()
	return q.DrainInto(b, nil)
}

// Restrict makes Push fail with ErrClosed, as Close does, while
// PushLateOrWait and PushControl still work, until Close: a way to refuse
// new work while the work under way finishes. busy, shared by a set of
// queues restricted together, counts those of the set that are not idle
// (see MarkIdle); the caller sets it to their number first, and a push to
// an idle queue adds one. A queue closed already stays closed.
func (q *Queue[T, C]) Restrict(busy *atomic.Int64) {
	q.mu.Lock()
	if q.gate == gateOpen {
		q.gate, q.busy = gateRestricted, busy
	}
	q.releaseWaiters() // they retry, and find the lane restricted
	q.mu.Unlock()
	q.signal()
}

// MarkIdle marks a restricted queue idle if nothing is queued in either
// lane, counting it out of its set's busy queues until its next push. It
// reports whether it marked the queue, and whether that left no queue of
// the set busy: with pushes that come only from work under way, the
// moment the whole set is quiet. A queue not restricted, or idle already,
// is not marked.
func (q *Queue[T, C]) MarkIdle() (marked, last bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.gate != gateRestricted || q.idle || q.n > 0 || len(q.ctl) > 0 {
		return false, false
	}
	q.idle = true
	return true, q.busy.Add(-1) == 0
}

// releaseWaiters wakes the senders waiting for room; q.mu is held.
func (q *Queue[T, C]) releaseWaiters() {
	if q.space != nil {
		close(q.space)
		q.space = nil
		// No more than the lane holds: those past it find it full again
		// and wait for the next Drain.
		q.reserved = min(q.reserved+q.waiting, q.limit)
		q.room = q.limit - q.reserved
		q.waiting = 0
	}
}

// wakeIdle counts an idle queue busy again; q.mu is held.
func (q *Queue[T, C]) wakeIdle() {
	if q.idle {
		q.idle = false
		q.busy.Add(1)
	}
}

// retire takes a segment a batch has finished, for reuse; the consumer's.
func (q *Queue[T, C]) retire(s *segment[T]) {
	clear(s.items[:s.n])
	s.n, s.next = 0, q.retired
	q.retired = s
	q.nretired++
	if q.nretired == maxRetired {
		q.mu.Lock()
		q.handBack()
		q.mu.Unlock()
	}
}

// handBack puts the retired segments on the free list, as many as it has
// room for; q.mu is held, by the consumer.
func (q *Queue[T, C]) handBack() {
	for s := q.retired; s != nil; {
		next := s.next
		if q.nfree < maxFree {
			s.next = q.free
			q.free = s
			q.nfree++
		} else {
			s.next = nil
		}
		s = next
	}
	q.retired, q.nretired = nil, 0
}

// Trim lets go of the spare segments the queue has not needed since the
// last Trim: as many as it had left at its lowest. A queue that took a
// burst keeps a full queue's worth of spare segments (about 1.4 MB at the
// silo's default capacity) only for as long as it keeps using them; called
// periodically, Trim returns them in one period once the queue is quiet,
// and frees little under steady traffic, which draws on them all along.
func (q *Queue[T, C]) Trim() {
	q.mu.Lock()
	q.handBack()
	for range q.lowFree {
		q.free = q.free.next
		q.nfree--
	}
	q.lowFree = q.nfree
	if q.bigEmptyLane() {
		// The array a Drain passed for the control lane, grown by a
		// burst and empty now: kept while the consumer waits for work,
		// it would be held for as long as the queue stays quiet.
		q.ctl = nil
	}
	q.mu.Unlock()
}

// Spare returns the number of spare segments the queue holds, and one
// more for a large, empty control lane: what the next Trims may still let
// go of.
func (q *Queue[T, C]) Spare() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.nfree + q.nretired
	if q.bigEmptyLane() {
		n++
	}
	return n
}

// bigEmptyLane reports whether the control lane is empty in an array
// larger than laneKeep. Called with q.mu held.
func (q *Queue[T, C]) bigEmptyLane() bool { return len(q.ctl) == 0 && cap(q.ctl) > laneKeep }

// laneKeep is the largest empty control lane Trim keeps.
const laneKeep = 1024

// Batch is the messages one Drain took, consumed in order with Pop. The zero
// Batch is empty. A Batch belongs to the queue's consumer.
type Batch[T, C any] struct {
	q    *Queue[T, C]
	seg  *segment[T]
	last *segment[T] // the chain's last segment, while seg is not nil
	i    int
	past int    // messages of the segments already recycled
	seq  uint64 // which Drain made it
}

// Seq numbers the Drains of a queue: 1 for the first, and so on (0 for the
// zero Batch).
func (b *Batch[T, C]) Seq() uint64 { return b.seq }

// Taken returns how many messages Next and Pop have returned so far.
func (b *Batch[T, C]) Taken() int { return b.past + b.i }

// Len returns how many messages the batch has left for Next and Pop.
func (b *Batch[T, C]) Len() int {
	n := 0
	for s, i := b.seg, b.i; s != nil; s, i = s.next, 0 {
		n += s.n - i
	}
	return n
}

// Pop removes and returns the next message of the batch.
func (b *Batch[T, C]) Pop() (T, bool) {
	if p := b.Next(); p != nil {
		return *p, true
	}
	var zero T
	return zero, false
}

// Next removes the next message of the batch and returns a pointer to it
// where it lies in the queue, or nil when the batch is empty: the consumer
// reads a message in place instead of copying it out. The pointer is valid
// until the next call of Next, Pop or Empty, which may hand its segment
// back to the producers. Slots are cleared when their whole segment is
// recycled, not one by one: fewer writes (and GC write barriers) per
// message, and a segment holds at most 256.
func (b *Batch[T, C]) Next() *T {
	for b.seg != nil {
		if b.i < b.seg.n {
			p := &b.seg.items[b.i]
			b.i++
			return p
		}
		done := b.seg
		b.past += done.n
		b.seg, b.i = done.next, 0
		b.q.retire(done)
	}
	return nil
}

// Peek returns a pointer to the message n places after the one Next
// returns next (n = 0 is that one), if it lies in the same segment, else nil.
// It removes nothing: a consumer uses it to look ahead, to start loading
// what the coming messages will touch.
func (b *Batch[T, C]) Peek(n int) *T {
	if b.seg == nil || b.i+n >= b.seg.n {
		return nil
	}
	return &b.seg.items[b.i+n]
}

// Ahead calls f with a pointer to each of the n messages that follow the
// next skip ones (skip = 0: from the one Next returns next), in order,
// where each lies, removing none; fewer if the batch ends first, and none
// after f returns false. The pointers are valid as Peek's are: a consumer
// may change the messages in place before it reads them.
func (b *Batch[T, C]) Ahead(skip, n int, f func(*T) bool) {
	s, i := b.seg, b.i
	for s != nil && i+skip >= s.n {
		skip -= s.n - i
		s, i = s.next, 0
	}
	i += skip
	for ; s != nil && n > 0; s, i = s.next, 0 {
		for ; i < s.n && n > 0; i, n = i+1, n-1 {
			if !f(&s.items[i]) {
				return
			}
		}
	}
}

// Empty reports whether Pop has nothing more to return.
func (b *Batch[T, C]) Empty() bool {
	for b.seg != nil && b.i >= b.seg.n {
		done := b.seg
		b.past += done.n
		b.seg, b.i = done.next, 0
		b.q.retire(done)
	}
	return b.seg == nil
}
