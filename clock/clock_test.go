package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestManualFiresInOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := clock.NewManual(start)
	var got []string
	m.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	m.AfterFunc(time.Second, func() {
		got = append(got, "a")
		assert.Equal(t, start.Add(time.Second), m.Now(), "runs at its due time")
		m.AfterFunc(500*time.Millisecond, func() { got = append(got, "a2") })
	})
	stopped := m.AfterFunc(1500*time.Millisecond, func() { got = append(got, "never") })
	assert.True(t, stopped.Stop())
	assert.False(t, stopped.Stop())
	m.Advance(time.Second)
	assert.Equal(t, []string{"a"}, got)
	m.Advance(5 * time.Second)
	assert.Equal(t, []string{"a", "a2", "b"}, got)
	assert.Equal(t, start.Add(6*time.Second), m.Now())
	assert.Zero(t, m.Pending())
}

func TestRealClock(t *testing.T) {
	c := clock.Real()
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	assert.False(t, c.Now().IsZero())
}

func TestSince(t *testing.T) {
	m := clock.NewManual(time.Unix(100, 0))
	start := m.Now()
	m.Advance(3 * time.Second)
	assert.Equal(t, 3*time.Second, clock.Since(m, start), "a clock without Since: Now().Sub")

	r := clock.Real()
	_, ok := r.(clock.Sincer)
	require.True(t, ok, "the real clock reads only the monotonic clock")
	t0 := r.Now()
	assert.GreaterOrEqual(t, clock.Since(r, t0), time.Duration(0))
}

// A Manual clock never goes back: a negative Advance counts as none, though
// it still runs what is due now.
func TestManualNeverGoesBack(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := clock.NewManual(start)
	fired := false
	m.AfterFunc(0, func() { fired = true })
	m.Advance(-time.Hour)
	assert.Equal(t, start, m.Now())
	assert.True(t, fired, "due now: run")
}

// Nor when Advances overlap: one that a due function makes, or another
// goroutine's, may move the clock further than the Advance around it; that
// one ends without moving it back. (It set the clock to its own end,
// earlier, whatever had happened meanwhile.)
func TestManualNeverGoesBackUnderNestedAdvances(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := clock.NewManual(start)
	m.AfterFunc(time.Second, func() { m.Advance(time.Hour) })
	m.Advance(time.Second)
	assert.Equal(t, start.Add(time.Second+time.Hour), m.Now())

	// A nil function fires and calls nothing (it was a nil call in
	// Advance, far from the mistake).
	m.AfterFunc(time.Second, nil)
	m.Advance(time.Second)
	assert.Zero(t, m.Pending())
}
