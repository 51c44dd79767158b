package silo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// othersWait stops a run of ready steps once they have run stepShare and
// something waits in the queue: neither alone.
func TestOthersWaitNeedsBothTheShareAndWaitingWork(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	p := s.parts[0] // not started: nothing drains its queue
	var from time.Time
	require.False(t, p.othersWait(&from), "the first call starts the clock")
	require.False(t, from.IsZero())
	require.False(t, p.othersWait(&from), "nothing waits, and the share has not run")

	p.q.PushControl(ctl{})
	require.False(t, p.othersWait(&from), "something waits, but the share has not run")
	from = from.Add(-stepShare)
	require.True(t, p.othersWait(&from), "the share has run, and something waits")

	p.ctls = p.q.DrainControl(p.ctls[:0])
	require.False(t, p.othersWait(&from), "the share has run, but nothing waits")
}
