package silo

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// logWriter writes the silo's log lines to Config.Logger on a goroutine of
// its own, in the order they were logged. The silo logs from its partition
// owners, in the middle of their work: a handler that blocked there — a
// full pipe, a log shipper pushing back — stopped every grain of the
// partition, and Close waited for it for ever. So an owner only queues its
// line (as Akka's logging does), and a queue grown past maxQueuedLines
// drops the line, counted as a sampled-out one is.
//
// The writer outlives its handler's misdeeds: a panic loses that line
// (counted), and runtime.Goexit — a test's handler calling t.FailNow on a
// warning — ends the writer's goroutine, whose deferred call starts another
// to go on with the rest. It runs only while lines wait: the first line
// after a quiet spell starts it, the last one ends it.
//
// Safe for concurrent use.
type logWriter struct {
	l       *slog.Logger   // nil: slog.Default(), looked up at each line
	dropped *atomic.Uint64 // the silo's count of lines not written (Stats)

	mu      sync.Mutex
	q       []logLine     // mu: waiting to be written, oldest first
	running bool          // mu: a writer goroutine is at work
	drained chan struct{} // mu: closed when that writer has emptied q and ended
	closed  bool          // mu: the silo has stopped: no more lines

	// handled counts lines the writer is done with: what close watches to
	// tell a slow handler from a stuck one.
	handled atomic.Uint64
}

type logLine struct {
	at    time.Time // when it was logged: a line's time is its event's, not its writing's
	level slog.Level
	msg   string
	args  []any
}

// maxQueuedLines bounds the lines waiting for a slow Logger. Sampling
// (Config.LogSampling) keeps the flow far below it; a handler that blocks
// for good would otherwise hold every line logged after its own.
const maxQueuedLines = 1024

// logLineWait is how long Shutdown and Close wait for a Logger handler that
// is making no progress, on one line, before they return without it.
const logLineWait = time.Second

func newLogWriter(l *slog.Logger, dropped *atomic.Uint64) *logWriter {
	return &logWriter{l: l, dropped: dropped}
}

// add queues a line, starting a writer if none is at work. A line that finds
// the queue full, or the silo stopped, is dropped and counted.
func (w *logWriter) add(level slog.Level, msg string, args []any) {
	w.mu.Lock()
	if w.closed || len(w.q) >= maxQueuedLines {
		w.mu.Unlock()
		w.dropped.Add(1)
		return
	}
	w.q = append(w.q, logLine{at: time.Now(), level: level, msg: msg, args: args})
	start := !w.running
	if start {
		w.running = true
		w.drained = make(chan struct{})
	}
	w.mu.Unlock()
	if start {
		go w.run()
	}
}

// run writes the queued lines until none is left.
func (w *logWriter) run() {
	finished := false
	defer func() {
		if !finished {
			// The handler ended this goroutine (runtime.Goexit) as it
			// wrote its line — written, most likely, as t.Log then
			// t.FailNow would: the rest are written on a new one.
			w.handled.Add(1)
			go w.run()
		}
	}()
	for {
		w.mu.Lock()
		if len(w.q) == 0 {
			w.running = false
			close(w.drained)
			w.q = nil // a burst's backing array goes with it
			w.mu.Unlock()
			finished = true
			return
		}
		line := w.q[0]
		w.q[0] = logLine{}
		w.q = w.q[1:]
		w.mu.Unlock()
		w.write(line)
		w.handled.Add(1)
	}
}

// write hands one line to the Logger's handler, as Logger.Log would but
// with the time it was logged; a handler that panics loses it, counted as
// dropped: the panic is not the silo's to die of. The ctx is the writer's
// own: the line has no caller.
func (w *logWriter) write(line logLine) {
	defer func() {
		if r := recover(); r != nil {
			w.dropped.Add(1)
		}
	}()
	ctx := context.Background()
	l := w.l
	if l == nil {
		l = slog.Default()
	}
	h := l.Handler()
	if !h.Enabled(ctx, line.level) {
		return
	}
	r := slog.NewRecord(line.at, line.level, line.msg, 0)
	r.Add(line.args...)
	_ = h.Handle(ctx, r) // a handler's error has nowhere to go, as with Logger.Log
}

// close takes no more lines and waits for those queued to be written — as
// long as the handler keeps writing them: one that spends logLineWait on
// a single line is left behind, and what it has not written is dropped.
func (w *logWriter) close() {
	w.mu.Lock()
	w.closed = true
	running, drained := w.running, w.drained
	w.mu.Unlock()
	if !running {
		return
	}
	t := time.NewTimer(logLineWait)
	defer t.Stop()
	for seen := w.handled.Load(); ; {
		select {
		case <-drained:
			return
		case <-t.C:
		}
		now := w.handled.Load()
		if now == seen { // stuck: the lines behind its own are dropped
			w.mu.Lock()
			n := len(w.q)
			w.q = nil
			w.mu.Unlock()
			w.dropped.Add(uint64(n))
			return
		}
		seen = now
		t.Reset(logLineWait)
	}
}
