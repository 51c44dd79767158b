package silo

import (
	"log/slog"
	"time"

	"github.com/granary-go/granary/activation"
)

// Time slices: a grain sent a flood of messages shares its partition with
// the partition's other grains, as Orleans' scheduler runs an activation's
// messages for a quantum and then the next activation's.
//
// A message for an idle grain runs as its owner comes to it in the queue
// (enqueue), which is what makes a tell cheap. Left at that, a flood of
// messages to one grain — thousands sent in a loop, each turn doing some
// work — ran turn after turn while everything its partition was sent
// behind the flood waited for all of it (2,000 turns of 200 µs: an ask to
// another grain of the partition waited 0.4 s;
// TestAFloodToOneGrainHoldsItsPartitionASliceNotTheWholeFlood). So a round
// has a slice: once the handoff monitor has looked deliverLooks times
// since the round began delivering (one to two HandoffThresholds: 5–10 ms
// by default), a message for a grain that was running a turn of this round
// when the monitor looked (ranInline: the grain the round's time went to)
// waits in its mailbox, the grain ready, instead of running then; the
// other grains' messages still run as they come, and the ready grains then
// take their steps in turn — the flood's grain one message a step — while
// messages wait in the queue, for as long as the round's deliveries ran,
// 200 µs at least (runReady). Once the flood's backlog is full, its
// senders wait at its door until it has room (hold).
//
// Deferring every grain that ran a turn in a long round, as the first
// version did, sent a busy partition's whole traffic through mailboxes:
// after a round of a full queue's cheap turns, hundreds of grains were
// ready, each stepping about as often as it was sent a message, and a hot
// grain among them — an eighth of the messages, one step in hundreds —
// fell behind until its backlog held its senders
// (TestAHotKeyOfABusyPartitionKeepsPace). Blamed by the looks, a round of
// cheap turns defers a grain or two.
//
// The monitor's looks are the deliveries' clock: reading one is an atomic
// load, one a message that runs as it came. The monitor looks on real
// time while any owner is awake, and the steps read the real clock, so a
// round that takes its time is sliced, whatever clock the silo's grains
// see.

// How many of the monitor's looks a round's deliveries run for before a
// grain's further messages wait for its step. Two looks make sure the
// deliveries have run a whole HandoffThreshold: at one, a round of
// ordinary length that a look fell in — one in a few, in `tell` — deferred
// its grains' second messages, each to a mailbox made for it (`tell` and
// `zipf` a third slower).
const deliverLooks = 2

// A flood's steps — a grain with floodDepth messages or more waiting,
// stepping again in a round once every grain ready at the round's start
// has had its step (runReady) — stop, while messages wait in the queue,
// once they have run their share on the real clock: as long as the
// round's deliveries took, stepShare at least. runReady reads the clock at
// the first such step, and then about every stepGrain of steps — after
// each step when they are slow (a flood's turns of some work), after up to
// maxStride when they are cheap, where a read would cost a tenth of one.
//
// The floor is the flood's neighbours' wait: stopped at the monitor's next
// look, they waited 5 ms at the median; with a share of 1 ms, 0.7 ms (the
// bench's `flood`); at 200 µs, 0.28 ms, the flood's own rate unchanged.
// The share as long as the deliveries is the flood's own: with a fixed
// 200 µs, a hot grain of a busy partition — `zipf`'s first key, an eighth
// of the messages, each turn cheap — once deferred was given 200 µs of
// steps for every few milliseconds of a full queue's deliveries, and fell
// behind until its backlog held the queue (docs/performance-log.md, item
// 41). Matching the deliveries, a flood takes at most half its partition
// while other grains are sent messages, and all of it while they are not.
//
// Only a deep backlog ends the steps: a slice for any steps kept a
// partition behind for good once it fell behind with many grains ready —
// in `tell`, a round slow on a busy machine deferred its grains' second
// messages; with the steps cut while each grain was sent more than a
// message a round, every message went through a mailbox from then on
// (4.4 million of the 10 million took a step: 3.7–4.3 M/s against 9–12;
// beside two CPU-bound goroutines, 2.8 against 5.4).
const (
	floodDepth = 16
	stepShare  = 200 * time.Microsecond
	stepGrain  = 20 * time.Microsecond
	maxStride  = 64
)

// floodStep reports whether a's step, due now, is a flood's: one after
// which the round's steps may end once they have run their share
// (othersWait), and one a neighbour's message may step off (publishStep).
// A grain with floodDepth messages waiting, or whose senders wait at its
// door — or whose steps were last measured slow, to its flood's last
// message: cut off at floodDepth, a flood of 200 µs turns ran its last
// fifteen in a row, and a neighbour's ask sent meanwhile waited for them
// all, 3–4 ms.
func (p *partition) floodStep(a *act) bool {
	return a.Mailbox.Len() >= floodDepth || a.slowSteps() || len(p.holders) > 0 && p.heldNow(a)
}

// stepClock is runReady's reading of the real clock: when its steps began
// (read after the first), the share they may run, and at which step it
// reads next.
type stepClock struct {
	from  time.Time // zero until the first reading
	share time.Duration
	n0    int
	next  int
	// the last reading and its step; took: how long the step before it
	// ran, when the clock was read at both its ends, else -1 (stepoff.go)
	at   time.Time
	atN  int
	took time.Duration
}

// othersWait reads the clock at step n, if it is c's next, and reports
// whether the steps have run their share since c began and messages or
// control items wait in the queue meanwhile. The share is set at the first
// reading: the time the round's deliveries took, if they were timed
// (partition.delivered), stepShare at least — not the time since they
// began, which counts the ready grains' first steps too: a flood's own
// first step, 200 µs, made its share 400 µs and its neighbours' wait half
// as long again.
func (p *partition) othersWait(c *stepClock, n int) bool {
	c.took = -1
	if n < c.next {
		return false
	}
	now := time.Now()
	if !c.at.IsZero() && c.atN == n-1 {
		c.took = now.Sub(c.at)
	}
	c.at, c.atN = now, n
	if c.from.IsZero() {
		c.from, c.n0, c.next = now, n, n+1
		c.share = max(stepShare, p.delivered)
		return false
	}
	ran := now.Sub(c.from)
	if ran >= c.share && p.q.Len() > 0 {
		return true
	}
	stride := maxStride
	if ran > 0 {
		stride = max(1, min(maxStride, int(stepGrain*time.Duration(n-c.n0)/ran)))
	}
	c.next = n + stride
	if ran >= c.share && p.answered != p.answeredSeen && p.s.yieldsFor(p.answered-p.answeredSeen) {
		// The share ran and nothing came, but the partition answered
		// asks meanwhile: the steps go on once their callers have run.
		// On one core they would otherwise wait for the scheduler to
		// preempt the owner, 10–20 ms, however short the slice (the
		// bench's `flood` at GOMAXPROCS=1: its neighbours' asks took
		// 20 ms at the median; on two cores, where the other was busy,
		// 2–4 ms at the 99th percentile). Only then: with a core idle a
		// yield wakes it, and the owner goes on there, 10 µs later (every
		// share, a flood's rate dropped 4 %). A caller's next message, if
		// it sent one, ends the steps at once.
		p.answeredSeen = p.answered
		p.s.yieldSince(now)
		p.yields++
		if p.q.Len() > 0 {
			return true
		}
		c.from, c.n0 = time.Now(), n
		c.at = c.from // the next step's time is its own, not the yield's
	}
	return false
}

// ranInline records that a runs a message as it came, this round, and
// blames the grain whose message ran before it if the monitor has looked
// since that one began: the grain the round's time was going to then. A
// look falls in a turn in proportion to the turn's length, so in a round
// of cheap turns it blames one grain a look, at random; in a flood's, the
// flood's grain, look after look.
func (p *partition) ranInline(a *act) {
	if l := p.s.dog.looks.Load(); l != p.lookSeen {
		p.lookSeen = l
		if b := p.lastRan; b != nil && b.Round == p.round {
			b.Round = p.round | 1
		}
	}
	if a.Round&^1 != p.round {
		a.Round = p.round
	}
	if a == p.lastRan {
		p.streak++
	} else {
		p.streak = 0
	}
	p.lastRan = a
}

// overSlice reports whether a message for a, which could run as it came,
// waits for a's step instead: a ran a message this round when the monitor
// looked, and the round has had its slice.
func (p *partition) overSlice(a *act) bool {
	return a.Round == p.round|1 && p.sliceOver(p.sliceAt, deliverLooks)
}

// A flood of slow turns is known before the monitor's looks: a grain whose
// messages run as they come, one after another, streakFrom of them and more
// in a row, is timed — the clock read as the streak's turn streakFrom
// begins, and again after 1, 2, 4, 8… more of its turns — and once they
// took stepOffMin each on average, or streakSlice all told, its next
// message waits for its step, as if the round had had its slice: the
// partition's other messages go next, and the flood steps — a slow flood's
// each step one a neighbour's message may step off (stepoff.go). Waiting
// for the looks, the first message sent to a neighbour as a flood of
// 10,000 tells began waited for the slice and more, 8–16 ms on two cores
// (turns of 5, 20 or 200 µs); now a few of the flood's turns when they are
// slow — four of 200 µs, where the first check after 4 more let seven run
// — and 2–4 ms when they are quick (TestAFloodStepsAfterAStreakOfItsTurns).
//
// A streak is rare in a busy partition's mixed traffic — `zipf`'s hot keys
// make a run of four once in some 700 messages — and only a streak reads
// the clock, a few times in each. The check sits in enqueue, not in
// overSlice, which stays small enough to inline.
const streakFrom = 3

// streakSlice is how long a streak of quicker turns runs before the
// grain's next message waits for its step: a flood of 5 or 20 µs turns
// held its neighbours for the looks' slice (5–10 ms) and then for the
// flood's share of steps, where a slow flood's took a few of its turns. A
// streak is checked when its turns since the clock are a power of two, so
// it runs streakSlice to twice that. A round of mixed traffic has no such
// streak: `tell` and `zipf` are even with it.
const streakSlice = time.Millisecond

// floodStreak reports whether lastRan's streak shows a flood, so that its
// next message, which would run now as the streak's next, waits for its
// step instead: the streak's turns were slow — then its steps are marked
// slow too, to be stepped off (stepoff.go) — or ran streakSlice. It reads
// the clock as the streak's message streakFrom (counted from 0) begins and
// at its checks (see above).
func (p *partition) floodStreak() bool {
	m := p.streak + 1 - streakFrom // the streak's turns since its clock
	if m == 0 {
		p.streakAt = time.Now()
		return false
	}
	if m&(m-1) != 0 {
		return false
	}
	switch ran := time.Since(p.streakAt); {
	case ran >= time.Duration(m)*stepOffMin:
		p.slowFlood(p.lastRan)
		p.streakFlood = true
		return true
	case ran >= streakSlice:
		p.flooder = p.lastRan // a flood of quicker turns: a slice of them
		p.streakFlood = true
		return true
	}
	return false
}

// sliceOver reports whether the monitor has looked n times since its looks
// numbered at.
func (p *partition) sliceOver(at, n uint32) bool {
	return p.s.dog.looks.Load()-at >= n
}

// served reports whether a's turns run as the partition comes to them — it
// is active, no turn of it runs or waits, and it is not on its way out — so
// a backlog it has is one it works down, a step a round or more.
func (p *partition) served(a *act) bool {
	return p.mode == modeRunning && a.State() == activation.Active && !a.busy() &&
		!a.wantsDeactivate() && !a.isStopping()
}

// heldGrain is a served grain whose full backlog holds (or held) its
// senders at its door (door.go).
type heldGrain struct {
	a *act
	// off: a turn of the grain went off the partition since (handed off:
	// blocked, or its goroutine preempted for a look of the monitor), so
	// its senders are not held; base is its backlog then, which it had
	// taken while served: its backlog limit counts what comes past it
	// (backlogFull)
	off  bool
	base int
	// door: its senders wait at its door (doorWait) but for a budget, the
	// room its backlog had at the last round (holding), until the hold
	// ends; busyAt: the monitor's look count when the hold last had a
	// sender waiting, or a backlog past half its limit
	door   bool
	busyAt uint32
}

// goOff records that a turn of h's grain went off the partition, with
// the backlog it held then, unless that is known already.
func (h *heldGrain) goOff() {
	if !h.off {
		h.off, h.base = true, h.a.Mailbox.Len()
	}
}

// hold makes a's senders wait at its door while a, served but sent
// messages faster than it handles them, has a full backlog. A grain that
// ran each message as it came kept up by holding the partition — the
// queue filled behind it and its senders waited for room; sliced, it
// shares the partition and builds a backlog instead, and refusing what
// comes next (RejectNewest) or dropping what came first (DropOldest) would
// lose messages the same program never lost before: a loop of 300,000
// tells to a counter, under the race detector, was refused at its
// 10,000th. So its senders wait for room, bounded by their ctx, while the
// partition's other grains take their messages.
//
// A grain whose turns do not run overflows by its policy instead
// (backlogFull) — one blocked in a turn, where waiting would not help. One
// that held its senders and then went off the partition counts toward its
// limit only what came after: a turn handed off because its goroutine
// waited for a core — on a loaded machine, any turn may be — left it with
// the backlog it held, and the next message would have been refused (and
// for a grace, it holds its senders still: holdgrace.go). backlog is a's
// backlog as the hold begins, for its log line: with the message that
// filled it, where that message is still on its way in.
func (p *partition) hold(a *act, backlog int) {
	h := p.holderOf(a)
	switch {
	case h == nil:
		p.holders = append(p.holders, heldGrain{a: a, busyAt: p.s.dog.looks.Load()})
		h = &p.holders[len(p.holders)-1]
		p.holdBegins(a, backlog)
	case h.off:
		h.off = false
		p.holdBegins(a, backlog)
	}
	p.shutDoor(h, 0)
}

// shutDoor makes h's grain's senders wait at its door, but for budget of
// them (door.go). It reports whether a sender waited there since the last
// call.
func (p *partition) shutDoor(h *heldGrain, budget int) (waited bool) {
	h.door = true
	return p.setDoor(h.a, doorWait, true, budget)
}

// openDoor lets h's grain's senders in again, all of them.
func (p *partition) openDoor(h *heldGrain) {
	if h.door {
		h.door = false
		p.setDoor(h.a, doorWait, false, 0)
	}
}

// holdBegins counts and logs a hold by a, whose backlog is backlog: the
// grain a program sends more than it handles, which its senders' waits
// alone would not name.
func (p *partition) holdBegins(a *act, backlog int) {
	p.s.backlogHolds.Add(1)
	p.s.log(slog.LevelWarn, "granary: a grain's backlog is full while its turns run: its senders wait until it has room",
		"grain", a.ID.String(), "backlog", backlog, "limit", a.k.maxBacklog)
}

// holding updates the holds, once a round. A held grain's door lets in as
// many senders as its backlog has room for (its steps are cut short, as a
// flood's, when messages wait: runReady), and its hold goes when, its
// backlog at most half its limit, no sender has waited at its door for
// quietLooks of the monitor's looks — a grain kept at its limit holds
// once, not once a round (a round's evidence alone is a race: a sender
// just let in has not come back yet) — or when the grain goes away. While a turn of it is off the partition its door is
// open and its hold kept for its base — but for a grace (holdgrace.go).
func (p *partition) holding() {
	kept := p.holders[:0]
	for _, h := range p.holders {
		a := h.a
		switch {
		case p.mode != modeRunning || a.State() != activation.Active && !p.activatingInGrace(a) || a.wantsDeactivate() || a.isStopping():
			p.openDoor(&h)
			continue
		case a.busy() && !p.graced(a) && !p.waitGrace(a):
			h.goOff()
			p.openDoor(&h)
		case a.Mailbox.Len() >= a.k.maxBacklog:
			h.off = false
			p.shutDoor(&h, 0)
		case h.off:
			p.openDoor(&h) // served again with room: its senders go, if not let go as it went off
			continue
		default:
			waited := p.shutDoor(&h, a.k.maxBacklog-a.Mailbox.Len()) // room for some
			switch looks := p.s.dog.looks.Load(); {
			case waited || a.Mailbox.Len() > a.k.maxBacklog/2 || a.busy():
				h.busyAt = looks
			case looks-h.busyAt >= quietLooks:
				p.openDoor(&h) // it keeps up again
				continue
			}
		}
		kept = append(kept, h)
	}
	clear(p.holders[len(kept):])
	p.holders = kept
}

// quietLooks is how many of the monitor's looks a hold lasts with no sender
// waiting: one to two HandoffThresholds.
const quietLooks = 2

// openAllDoors lets every held grain's senders go, as the partition stops.
func (p *partition) openAllDoors() {
	for i := range p.holders {
		p.openDoor(&p.holders[i])
	}
	p.holders = nil
}

// heldNow reports whether a's senders wait at its door.
func (p *partition) heldNow(a *act) bool {
	h := p.holderOf(a)
	return h != nil && h.door
}

// holderOf returns a's hold, or nil if it has none.
func (p *partition) holderOf(a *act) *heldGrain {
	for i := range p.holders {
		if h := &p.holders[i]; h.a == a {
			return h
		}
	}
	return nil
}

// heldBase returns the backlog a grain that held its senders had
// when its turn went off the partition, and 0 for any other grain. The
// hold goes off with it, if it had not: the grain is not served (a turn of
// it runs elsewhere, past any grace), so its senders are not held — its
// door opens, as holding would open it. (Left shut, the door outlived the
// hold, which holding then dropped as the grain was served again: its
// senders waited there until their ctx ended.)
func (p *partition) heldBase(a *act) int {
	if h := p.holderOf(a); h != nil {
		h.goOff()
		p.openDoor(h)
		return h.base
	}
	return 0
}
