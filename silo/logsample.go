package silo

import (
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
	// on Config.Clock: under a manual clock that a test never advances,
	// each message has its First lines and no more. Default
	// DefaultLogTick.
	Tick time.Duration
	// First is how many lines with one message are written each Tick.
	// Default DefaultLogFirst; negative means every line is written.
	First int
}

// logSampler carries out Config.LogSampling: per message, the first
// `first` lines of each tick pass, the rest are counted. It keeps no clock
// and starts nothing: the caller passes the time. Safe for concurrent use.
type logSampler struct {
	tick    time.Duration
	first   int // < 0: no bound
	mu      sync.Mutex
	byMsg   map[string]*logCount // mu; messages are the silo's constants
	dropped atomic.Uint64        // every line dropped, for Stats
}

// logCount is one message's tick.
type logCount struct {
	start   time.Time // when the tick began
	written int       // lines written in it
	dropped uint64    // lines dropped since the last written
}

func newLogSampler(c LogSampling) *logSampler {
	return &logSampler{tick: c.Tick, first: c.First, byMsg: make(map[string]*logCount)}
}

// admit reports whether a line with msg is to be written at now, and if it
// is, how many lines with msg were dropped since the last one written.
func (l *logSampler) admit(msg string, now time.Time) (write bool, droppedBefore uint64) {
	if l.first < 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.byMsg[msg]
	if c == nil {
		c = &logCount{start: now}
		l.byMsg[msg] = c
	}
	// A clock that goes back (a manual one, set) begins a tick too.
	if d := now.Sub(c.start); d >= l.tick || d < 0 {
		c.start, c.written = now, 0
	}
	if c.written >= l.first {
		c.dropped++
		l.dropped.Add(1)
		return false, 0
	}
	c.written++
	droppedBefore, c.dropped = c.dropped, 0
	return true, droppedBefore
}
