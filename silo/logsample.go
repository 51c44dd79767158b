package silo

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Config.LogSampling's zero fields.
const (
	// DefaultLogTick is the period over which lines with one message are
	// counted.
	DefaultLogTick = time.Second
	// DefaultLogFirst is how many lines with one message are written each
	// tick: enough to see what a storm is about, few enough that a million
	// failing tells do not write a million lines (Akka logs the first 10
	// dead letters, protoactor-go 3 a second).
	DefaultLogFirst = 10
)

// LogSampling bounds how many lines with the same message the silo writes:
// a storm — every tell to a grain failing, every turn slow, every tell to
// a stopped grain lost — would
// otherwise write a line per message, and the writing, not the messages,
// would become the silo's work (a failing tell cost 39 times a handled one
// with every line written to a JSON handler). The lines past the bound are
// dropped and counted: Stats().DroppedLogLines has them all, and the next
// line written with the same message carries how many were dropped before
// it ("dropped_lines"). What the lines report is also counted in Stats
// (FailedTells, SlowTurns, DeadLetters, …), so a dropped line loses no
// count, only the detail of one occurrence. A tell's dead letters are
// counted apart by reason: a storm of overloads cannot hide a failed
// activation.
type LogSampling struct {
	// Tick is the period over which lines with one message are counted,
	// on Config.Clock, ticks counted from the silo's Start: under a manual
	// clock that a test never advances, each message has its First lines
	// and no more. Default DefaultLogTick.
	Tick time.Duration
	// First is how many lines with one message are written each Tick.
	// Default DefaultLogFirst; negative (or above math.MaxUint32 - 1)
	// means every line is written — as fast as the Logger takes them: a
	// line that finds 1,024 waiting for it is dropped (see Config.Logger).
	First int
}

// logSampler carries out Config.LogSampling: per message, the first
// `first` lines of each tick pass, the rest are counted. It keeps no clock
// and starts nothing: the caller passes the time. Safe for concurrent use,
// and lock-free: in a storm every partition's owner asks it about the same
// message at once (with one mutex, a failing tell cost 153 ns where a
// handled one costs 58; without, 116: BenchmarkTellFailing).
type logSampler struct {
	tick    time.Duration
	first   int64    // < 0: no bound
	byMsg   sync.Map // message → *logCount; messages are the silo's constants
	dropped atomic.Uint64
}

// logCount is one message's tick.
type logCount struct {
	// the tick's index (the high 32 bits, wrapping) and the lines written
	// in it (the low 32): one word, so that the first line of a new tick
	// and the count go together
	word    atomic.Uint64
	dropped atomic.Uint64 // lines dropped since the last written
}

func newLogSampler(c LogSampling) *logSampler {
	first := int64(c.First)
	if first >= math.MaxUint32 { // more than a count word holds: no bound, in effect
		first = -1
	}
	return &logSampler{tick: c.Tick, first: first}
}

// admit reports whether a line with msg is to be written at now (the time
// since the silo started, on its clock), and if it is, how many lines with
// msg were dropped since the last one written. Ticks are counted from the
// start: a time in another tick than the last line's — later, or earlier on
// a clock set back — begins one.
func (l *logSampler) admit(msg string, now time.Duration) (write bool, droppedBefore uint64) {
	if l.first < 0 {
		return true, 0
	}
	v, ok := l.byMsg.Load(msg)
	if !ok {
		v, _ = l.byMsg.LoadOrStore(msg, new(logCount))
	}
	c := v.(*logCount)
	tick := now / l.tick
	if now < 0 && now%l.tick != 0 {
		tick-- // rounded down, not toward zero
	}
	idx := uint64(tick) << 32
	for {
		w := c.word.Load()
		n := w & math.MaxUint32
		if w&^math.MaxUint32 != idx {
			n = 0 // a new tick
		}
		if n >= uint64(l.first) {
			c.dropped.Add(1)
			l.dropped.Add(1)
			return false, 0
		}
		if c.word.CompareAndSwap(w, idx|(n+1)) {
			return true, c.dropped.Swap(0)
		}
	}
}
