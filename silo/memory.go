package silo

import (
	"log/slog"
	"math/bits"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/idle"
)

// Shedding activations under memory pressure (Config.MemoryLimit), as
// Orleans 9.2 does (EnableActivationSheddingOnMemoryPressure): a cap on the
// number of activations (MaxActivations) cannot know how much state each
// holds; this watches the memory itself.
//
// At each idle tick the ticker reads the gauge once for the silo (and,
// while memory is past the limit, every 100 ms between ticks: memlook.go).
// Above the limit, it asks every partition to shed the share of its activations that
// would bring memory down to the target (nine tenths of the limit) if memory
// were spread evenly over activations — Orleans' estimate too. Each
// partition deactivates that many of its idle-collectable grains, those
// nearest their idle deadline first: for grains of one idle timeout, the
// least recently active. The live heap the default gauge reads is measured
// at the end of a GC, so the ticker decides on a figure only once, and when
// the heap has grown past the limit since the last one, it asks for a GC
// rather than wait for the heap to double (GOGC) before it hears of it.

// ShedTargetPercent is the share of Config.MemoryLimit that shedding aims
// to bring memory down to, in percent.
const ShedTargetPercent = 90

// MemoryGauge reports the memory in use, in bytes, that Config.MemoryLimit
// is held to. The silo calls MemoryInUse once an idle tick, and every
// 100 ms between ticks while memory is past the limit, on a goroutine of
// its own, never two calls at once (an implementation needs no lock of
// its own for the silo's sake); it should return at once. A tick waits
// for it at most 100 ms: one that takes longer gives no reading that tick,
// and the idle ticks go on collecting idle grains without it (the next
// tick reads what it returns, once it has, rather than call it again). One
// that panics gives no reading that tick (logged at Error).
//
// A gauge of the program's own is read fresh at every tick, and every
// reading above the limit sheds its share again: it must fall as grains
// are shed — soon after the next GC, as the live heap does. One that does
// not — a process's resident memory, a container's usage, which Go's freed
// heap leaves high for minutes — reads as memory still short, and the
// silo sheds at every tick until no idle grain is left (checked: a gauge
// stuck at twice the limit shed all 1,000 idle grains in 100 ms at a 10 ms
// IdleQuantum). Read the heap for such a limit (the default), or have the
// gauge subtract what the runtime holds free (runtime/metrics).
type MemoryGauge interface {
	MemoryInUse() uint64
}

// MemoryGaugeFunc adapts a function to MemoryGauge.
type MemoryGaugeFunc func() uint64

// MemoryInUse calls f.
func (f MemoryGaugeFunc) MemoryInUse() uint64 { return f() }

// heapGauge is the default MemoryGauge: the Go heap's live bytes, as
// measured by the last GC (runtime/metrics /gc/heap/live:bytes) — the state
// the program keeps, not its garbage.
type heapGauge struct{}

// heapReading is what the silo reads of the heap at an idle tick.
type heapReading struct {
	live uint64 // live bytes at the end of the last GC
	now  uint64 // bytes in heap objects now, garbage not yet swept included
	gcs  uint64 // GCs ended so far
}

func (heapGauge) read() heapReading {
	s := [3]metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s[:])
	var v [3]uint64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	return heapReading{live: v[0], now: v[1], gcs: v[2]}
}

func (g heapGauge) MemoryInUse() uint64 { return g.read().live }

// shedState is the idle ticker's memory of shedding.
type shedState struct {
	mu       sync.Mutex // ticks do not overlap; this makes sure
	shedding bool       // the last look found memory above the limit
	// past: the last look found the heap (garbage included) or the
	// gauge's figure above the limit — memory is looked at again soon
	// (lookSoon), not a tick later. pending is past && !futile, for
	// lookSoon, which holds s.mu and so may not take mu (askGC takes s.mu
	// under mu).
	past    bool
	pending atomic.Bool
	looked  uint64 // the default gauge's GC count at the last look
	gcAsked bool   // a GC the silo asked for has not ended
	// A shed decided at the last look, and Stats().Shed then: if the next
	// look finds nothing shed since, shedding is futile for now (every
	// grain left busy, kept alive or pinned), and the silo asks for no more
	// GCs — a GC every other tick would free nothing of its — and looks at
	// memory only at the ticks (memlook.go) until memory is back within
	// the limit or a shed takes something again.
	decided bool
	shedAt  uint64
	futile  bool
	// call is a Config.MemoryGauge call that a tick stopped waiting for:
	// the next tick takes its answer rather than make another
	call *gaugeCall
}

// setPast sets past, and pending with it. mu held.
func (st *shedState) setPast(past bool) {
	st.past = past
	st.pending.Store(past && !st.futile)
}

// gaugeCall is one MemoryInUse call, on a goroutine of its own.
type gaugeCall struct {
	done chan struct{}
	used uint64 // set before done is closed
	ok   bool   // it returned (did not panic)
}

// gaugeWait bounds how long an idle tick waits for a Config.MemoryGauge.
const gaugeWait = 100 * time.Millisecond

// shedShare reads the gauge and returns the share of activations each
// partition is to shed at this tick, in parts per million; 0 when memory is
// within the limit or shedding is off. Called by the idle ticker.
func (s *Silo) shedShare() int {
	if s.cfg.MemoryLimit <= 0 {
		return 0
	}
	limit := uint64(s.cfg.MemoryLimit)
	st := &s.shed
	var used uint64
	if g, isHeap := s.cfg.MemoryGauge.(heapGauge); isHeap {
		r := g.read()
		st.mu.Lock()
		defer st.mu.Unlock()
		if r.now <= limit { // the heap, garbage and all, is within: so is what lives in it
			s.endShortage(r.live, limit)
			return 0
		}
		st.setPast(true)
		// The heap is past the limit. Whether the live part is, only a GC
		// tells: the last one's figure is news only if it ended since the
		// last look — not the one a shed was decided on, and not one from
		// before the heap grew. Without one, ask for one (a GC the silo
		// would otherwise wait on for as long as the heap takes to double),
		// if there is anything to shed, and decide at a later tick.
		if r.gcs == st.looked {
			if !st.gcAsked && !st.futile && s.anySheddable() {
				st.gcAsked = s.askGC()
			}
			return 0
		}
		st.looked = r.gcs
		if st.decided {
			st.futile = s.shedCount.Load() == st.shedAt
			st.setPast(true)
		}
		used = r.live
	} else {
		st.mu.Lock()
		defer st.mu.Unlock()
		var ok bool
		if used, ok = s.readGauge(); !ok {
			return 0
		}
		if st.decided { // every reading is news: a shed since, or none
			st.futile = s.shedCount.Load() == st.shedAt
		}
	}
	if used <= limit {
		s.endShortage(used, limit)
		return 0
	}
	st.setPast(true)
	if !st.shedding {
		s.log(slog.LevelWarn, "granary: memory above Config.MemoryLimit: shedding idle activations", "in_use", used, "limit", limit)
		st.shedding = true
	}
	st.decided, st.shedAt = true, s.shedCount.Load()
	target := limit/100*ShedTargetPercent + limit%100*ShedTargetPercent/100 // exact for small limits, no overflow for large
	hi, lo := bits.Mul64(used-target, 1_000_000)
	ppm, _ := bits.Div64(hi, lo, used) // (used-target)/used < 1: no overflow
	return int(ppm) + 1                // rounded up: shed at least one
}

// endShortage notes that memory is within the limit. s.shed.mu held.
func (s *Silo) endShortage(used, limit uint64) {
	s.shed.decided, s.shed.futile = false, false
	s.shed.setPast(false)
	if s.shed.shedding {
		s.shed.shedding = false
		s.log(slog.LevelInfo, "granary: memory back within Config.MemoryLimit", "in_use", used, "limit", limit)
	}
}

// askGC starts a GC on a goroutine of the silo's, unless the silo is
// stopping: Close waits for it. s.shed.mu held, which the goroutine takes
// when the GC has ended.
func (s *Silo) askGC() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.Load() != stateRunning {
		return false
	}
	s.gcRuns.Go(func() {
		runtime.GC()
		s.shed.mu.Lock()
		s.shed.gcAsked = false
		s.shed.mu.Unlock()
	})
	return true
}

// anySheddable reports whether some partition had a grain that idle
// collection could take, at its last idle tick: a GC asked for with none
// would free nothing of the silo's.
func (s *Silo) anySheddable() bool {
	for _, p := range s.parts {
		if p.idleLen.Load() > 0 {
			return true
		}
	}
	return false
}

// readGauge reads a Config.MemoryGauge of the program's own, taken as
// fresh at every reading. It is the program's code, run on a goroutine of
// its own: one that panics or calls runtime.Goexit gives no reading
// (logged), and one that has not returned within gaugeWait gives none yet
// — the idle ticks, and idle collection with them, go on without it, and a
// later tick takes what it returns. s.shed.mu held.
func (s *Silo) readGauge() (used uint64, ok bool) {
	c := s.shed.call
	if c == nil {
		c = &gaugeCall{done: make(chan struct{})}
		go func() {
			defer close(c.done)
			defer func() {
				if r := recover(); r != nil {
					s.log(slog.LevelError, "granary: Config.MemoryGauge panicked", "panic", r)
				}
			}()
			c.used = s.cfg.MemoryGauge.MemoryInUse()
			c.ok = true
		}()
	}
	select {
	case <-c.done:
	default:
		t := time.NewTimer(gaugeWait)
		defer t.Stop()
		select {
		case <-c.done:
		case <-t.C:
			s.shed.call = c // still out: the next tick waits for this one
			return 0, false
		}
	}
	s.shed.call = nil
	return c.used, c.ok
}

// How near its idle deadline a grain is, in buckets of 1/128 of an octave
// (bucketOf): slacks under 1 % apart may share one, so grains active 7 s
// apart are told apart at a 15-minute idle timeout, 30 s apart at an hour.
// The histogram is 29 KB, made for a partition's first shed.
const (
	shedSubBits = 7
	shedBuckets = (63 - shedSubBits + 1) << shedSubBits
)

// bucketOf returns the bucket of a slack of d nanoseconds: the octave, then
// the shedSubBits bits after its top one.
func bucketOf(d int64) int {
	const sub = 1 << shedSubBits
	if d <= 0 {
		return 0
	}
	u := uint64(d)
	if u < sub {
		return int(u)
	}
	n := bits.Len64(u) // shedSubBits+1 .. 63
	return (n-shedSubBits)<<shedSubBits + int(u>>(n-shedSubBits-1))&(sub-1)
}

// shed deactivates ppm parts per million of the partition's activations,
// chosen among the grains that idle collection could take now — active,
// not busy, nothing waiting, not kept by DelayDeactivation — those nearest
// their idle deadline first. Two passes over the idle wheel: the first
// counts candidates by bucket to find where the cut falls, the second asks
// them to deactivate. Each goes shedSlice entries at a time, between which
// the owner serves its messages (shedMore): a million grains are two
// passes of 7-9 ms, which held every other grain of the partition before.
// A shed under way takes no other: an idle tick that asks for one
// meanwhile leaves it to the next tick's look at memory. Owner only, from
// collectIdle.
func (p *partition) shed(ppm int) {
	if p.shedding.on {
		return
	}
	n := p.dir.Len()
	want := int((int64(n)*int64(ppm) + 999_999) / 1_000_000)
	if want == 0 || p.wheel.Len() == 0 {
		return
	}
	if p.shedHist == nil {
		p.shedHist = make([]int32, shedBuckets)
	}
	clear(p.shedHist)
	p.wheel.EndEach()
	p.shedding = shedRun{on: true, want: want, at: p.now}
	p.shedMore()
}

// shedRun is a shed under way (shed): the state its slices share.
// Between two owner rounds a shed is on exactly while an opShedMore of it
// is queued: each slice queues the next or ends the shed.
type shedRun struct {
	on      bool
	picking bool          // the count is done: the second pass asks them
	want    int           // how many to shed
	at      time.Duration // slack is measured from this now, the shed's start
	// found by the count: candidates, then the bucket the cut falls in and
	// how many of its candidates go (all those below it do)
	eligible, cut, atCut int
	shed                 int // asked to deactivate so far
}

// shedSlice is how many idle-wheel entries a slice of a shed visits: about
// 60 microseconds' work (7-9 ns an entry, for 500,000 in a partition).
const shedSlice = 8192

// shedMore takes the next slice of the shed under way, and queues itself
// an opShedMore for the one after, if any. A shutdown or close ends it:
// every grain goes then anyway.
func (p *partition) shedMore() {
	r := &p.shedding
	if !r.on {
		return
	}
	if p.mode != modeRunning {
		p.endShed()
		return
	}
	if !r.picking {
		hist := p.shedHist
		if p.wheel.EachAtMost(shedSlice, func(e *idle.Entry[struct{}]) bool {
			if p.sheddable(actOf(e)) {
				hist[bucketOf(int64(e.Deadline()-r.at))]++
				r.eligible++
			}
			return true
		}) {
			p.queueShed()
			return
		}
		r.want = min(r.want, r.eligible)
		if r.want == 0 {
			p.endShed()
			return
		}
		below := 0 // every candidate in buckets below cut goes; want-below from cut
		for ; r.cut < shedBuckets && below+int(hist[r.cut]) < r.want; r.cut++ {
			below += int(hist[r.cut])
		}
		r.atCut = r.want - below
		r.picking = true // and the second pass begins at once
	}
	shed := 0
	more := p.wheel.EachAtMost(shedSlice, func(e *idle.Entry[struct{}]) bool {
		a := actOf(e)
		if !p.sheddable(a) {
			return true
		}
		b := bucketOf(int64(e.Deadline() - r.at))
		if b > r.cut {
			return true
		}
		if b == r.cut {
			if r.atCut == 0 {
				return true
			}
			r.atCut--
		}
		a.wantDeactivate(grain.DeactivationMemoryPressure)
		p.makeReady(a)
		shed++
		r.shed++
		return r.shed < r.want
	})
	p.s.shedCount.Add(uint64(shed))
	if more {
		p.queueShed()
		return
	}
	p.endShed()
}

func (p *partition) queueShed() { p.q.PushControl(ctl{op: opShedMore}) }

// endShed ends the shed under way, its wheel pass with it. Called by its
// last slice, when no opShedMore of it is queued.
func (p *partition) endShed() {
	p.shedding = shedRun{}
	p.wheel.EndEach()
}

// sheddable reports whether idle collection could take a now, deadline
// aside: unoccupied, and not kept by DelayDeactivation.
func (p *partition) sheddable(a *act) bool { return unoccupied(a) && a.keepUntil() <= p.now }
