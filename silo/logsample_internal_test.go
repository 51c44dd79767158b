package silo

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The sampler on logical time: per message, the first lines of each tick
// pass; the rest are counted, and the next line that passes says how many.
func TestLogSamplerWritesTheFirstOfEachTick(t *testing.T) {
	l := newLogSampler(LogSampling{Tick: time.Second, First: 2})
	t0 := 100 * time.Second
	at := func(d time.Duration) time.Duration { return t0 + d }
	type line struct {
		write   bool
		dropped uint64
	}
	admit := func(msg string, now time.Duration) line {
		w, d := l.admit(msg, now)
		return line{w, d}
	}

	assert.Equal(t, line{true, 0}, admit("a", at(0)))
	assert.Equal(t, line{true, 0}, admit("a", at(10*time.Millisecond)))
	assert.Equal(t, line{false, 0}, admit("a", at(20*time.Millisecond)))
	assert.Equal(t, line{true, 0}, admit("b", at(30*time.Millisecond)), "each message has its own count")
	assert.Equal(t, line{false, 0}, admit("a", at(999*time.Millisecond)))
	assert.Equal(t, uint64(2), l.dropped.Load())

	// The tick is over: the next line passes, and says two went before it.
	assert.Equal(t, line{true, 2}, admit("a", at(time.Second)))
	assert.Equal(t, line{true, 0}, admit("a", at(time.Second+1)))
	assert.Equal(t, line{false, 0}, admit("a", at(time.Second+2)))
	assert.Equal(t, uint64(3), l.dropped.Load())

	// A clock set back begins a tick rather than silencing the message
	// until it catches up.
	assert.Equal(t, line{true, 1}, admit("a", at(-time.Hour)))
}

func TestLogSamplerWithNoBoundWritesEveryLine(t *testing.T) {
	l := newLogSampler(LogSampling{Tick: time.Second, First: -1})
	for range 100 {
		w, d := l.admit("a", 0)
		assert.True(t, w)
		assert.Zero(t, d)
	}
	assert.Zero(t, l.dropped.Load())
}

// Owners ask at once about the same message in a storm: still exactly
// First lines a tick pass, and every line dropped is reported once, by a
// line that passes after it.
func TestLogSamplerIsExactUnderContention(t *testing.T) {
	const first, workers, each = 10, 8, 1000
	l := newLogSampler(LogSampling{Tick: time.Second, First: first})
	var passed, reported atomic.Uint64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if w, d := l.admit("a", 5*time.Millisecond); w {
					passed.Add(1)
					reported.Add(d)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, uint64(first), passed.Load())
	assert.Equal(t, uint64(workers*each-first), l.dropped.Load())
	w, d := l.admit("a", time.Second) // the next tick
	assert.True(t, w)
	assert.Equal(t, uint64(workers*each-first), reported.Load()+d, "each dropped line reported once")
}

// Ticks are counted from the silo's start, rounded down before it too (a
// manual clock set back), and a First no count word can hold is no bound.
func TestLogSamplerTicksAndBounds(t *testing.T) {
	l := newLogSampler(LogSampling{Tick: time.Second, First: 1})
	w, _ := l.admit("a", -time.Second+1)
	assert.True(t, w)
	w, _ = l.admit("a", -1)
	assert.False(t, w, "the same tick, before the start")
	w, d := l.admit("a", 0)
	assert.True(t, w, "the start begins a tick")
	assert.Equal(t, uint64(1), d)

	huge := newLogSampler(LogSampling{Tick: time.Second, First: math.MaxInt})
	for range 3 {
		w, _ := huge.admit("a", 0)
		assert.True(t, w)
	}
}
