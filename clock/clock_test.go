package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
