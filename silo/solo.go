package silo

import "time"

// On one core — GOMAXPROCS=1, as Go sets it in a container limited to one
// CPU — a partition's owner shares its core with every other goroutine of
// the program: the callers it answers, the handoff monitor, the program's
// own. An owner working down a flood ran until the scheduler preempted it,
// 10–20 ms at a time, and all of them waited that long: the bench's `flood`
// at GOMAXPROCS=1 answered its neighbours' asks within a slice, but their
// callers ran again 20 ms later at the median (protoactor: 0.08 ms). The
// monitor waited too, so the looks that end a round's slice (slice.go)
// came late, and a caller's yield behind the owner looked like one behind
// a hog (yield.go), which stopped every yield for a second.
//
// So on one core the owner yields its core itself: soloSlice after it last
// gave it up if it has answered asks since — their callers want it — and
// soloMax after whatever it did, for the monitor, the program's timers and
// the callers of other kinds of work. Then the `flood`'s callers run again
// within 0.4 ms at the median, 0.5–6 ms at the 99th percentile — and
// within microseconds since the owner also yields before a slow flood's
// next steps once its round answered asks (answeredYield, below). soloMax
// stays well under hogYield, so that a caller's yield behind the owner is
// not taken for one behind a hog (and on one core a yield that looks long
// on the monitor's reading is only suspected of it: yield.go). Yielding
// every soloSlice whatever the owner did — in a version whose slice did
// not start again at the owner's other yields — cost `tell` on one core a
// fifth of its rate; as it is, `tell`, `ask`, `zipf` and `pingpong` there
// are within their noise (alternating runs against the build before), and
// a soloMax of 2 ms measured below 1x on `zipf` and `pingpong` (0.95x, six
// and eight rounds, within their spread: not taken). A yield with
// nothing else to run costs half a microsecond. With more cores the others
// run beside the owner, and a yield that wakes an idle core to take the
// owner over costs 10 µs: there the owner yields only as it did, and in a
// flood's steps (othersWait).
//
// While the partition works down a flood (its flooder: a grain a streak of
// its messages or its steps showed flooded — slice.go, stepoff.go) the
// owner yields every soloFlood: each yield costs a microsecond against a
// quarter of a millisecond of the flood's, and the program's other
// goroutines — a flooded grain's neighbours' callers, a timer — had
// waited for soloMax. A goroutine's 1 ms timer beside a flood of 200 µs
// turns took 5 ms, 25 of its turns, and now 6
// (TestOnOneCoreAFloodOfSlowTurnsHoldsTheCoreBriefly); the bench's `flood`
// at GOMAXPROCS=1, p99 5.2 → 0.6 ms (protoactor 0.36–0.74), the flood's
// rate 0.3–0.5 % lower; with turns of 20 µs, p99 4.6–4.9 → 0.31 ms and
// p50 225 → 1.8 µs, the callers no longer waiting for the flood's share
// of steps (answeredYield). Work without a flood keeps soloMax: it is what a
// fifth of `tell` paid for.
const (
	soloSlice = 2 * time.Millisecond
	soloMax   = 5 * time.Millisecond
	soloFlood = 250 * time.Microsecond
)

// soloClock is the owner's reading of the real clock on one core: when it
// last took its core back (a yield, a park: read at the first count
// after it), and after how many more messages and steps it reads the
// clock again — about every stepGrain, after up to maxStride when they
// are cheap (as runReady's stepClock).
type soloClock struct {
	from    time.Time
	n, next int
	yields  uint32 // the partition's yields when from was read (partition.yields)
}

// soloTurn counts a message delivered or a step taken by an owner on one
// core, and yields the core once the owner has kept it long enough (see
// above). Not with the scheduler crowded, where a yield would put the
// owner behind every goroutine waiting — most of them waiting for its
// answers (yield.go).
func (p *partition) soloTurn() {
	c := &p.solo
	c.n++
	if c.n < c.next {
		return
	}
	now := time.Now()
	if c.yields != p.yields || c.from.IsZero() {
		// The owner yielded or parked since (or has just started): it
		// has kept the core from then on.
		c.from, c.yields, c.n, c.next = now, p.yields, 0, 1
		return
	}
	ran := now.Sub(c.from)
	if ran >= soloSlice && (p.answered != p.answeredSeen || ran >= soloMax) || ran >= soloFlood && p.flooder != nil {
		if !p.s.dog.crowded.Load() {
			p.answeredSeen = p.answered
			p.s.yieldSince(now)
			now = time.Now()
		}
		c.from, c.n, c.next = now, 0, 1
		return
	}
	stride := maxStride
	if ran > 0 {
		stride = max(1, min(maxStride, int(stepGrain*time.Duration(c.n)/ran)))
	}
	c.next = c.n + stride
}

// answeredYield yields before the steps of a flood (the partition's
// flooder) if the round answered asks: their callers run now, not after
// the flood's next steps. The steps let them run too once their share has
// run (othersWait), but a share is a step or two of a flood of 200 µs
// turns, ten of 20 µs. On one core each ask to a flooded grain's
// neighbour came back to its caller 0.2–0.4 ms after it was sent (the
// bench's `flood` at GOMAXPROCS=1), where it had its answer within
// microseconds. With more cores the callers were readied on the owner's
// core, and an idle one takes a goroutine readied on a busy core only
// after a pause of the scheduler's own (it leaves that core's runnext
// alone at first), longer than a quick flood's share: beside a flood of
// 20 µs turns a neighbour's ask took 136–140 µs at the median, 44 now.
// The same for a new owner a sender stepped off a flood's step
// (takeSteppedFor), before the steps of another flood or its own: two
// floods at once, 0.11–0.16 ms at the median before. A yield costs a
// microsecond; callers asking without a pause are answered more often for
// it, and the flood gives them up to a tenth of its rate. Not with the
// scheduler crowded, where the owner would yield behind every goroutine
// waiting for a core (yield.go).
func (p *partition) answeredYield() {
	if p.answered == p.answeredSeen || p.s.dog.crowded.Load() {
		return
	}
	p.answeredSeen = p.answered
	p.s.yieldSince(time.Now())
	p.yields++
}
