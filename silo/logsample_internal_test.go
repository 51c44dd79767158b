package silo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The sampler on logical time: per message, the first lines of each tick
// pass; the rest are counted, and the next line that passes says how many.
func TestLogSamplerWritesTheFirstOfEachTick(t *testing.T) {
	l := newLogSampler(LogSampling{Tick: time.Second, First: 2})
	t0 := time.Unix(100, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type line struct {
		write   bool
		dropped uint64
	}
	admit := func(msg string, now time.Time) line {
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
		w, d := l.admit("a", time.Unix(0, 0))
		assert.True(t, w)
		assert.Zero(t, d)
	}
	assert.Zero(t, l.dropped.Load())
}
