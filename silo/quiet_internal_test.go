package silo

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
)

// An owner's wait for work marks its partition quiet when it lasted
// quietWait or more, and not quiet when shorter (yield.go).
func TestAnOwnersWaitMarksItsPartitionQuiet(t *testing.T) {
	p, _ := ownedPartition(t, t.Context(), Config{})
	p.noteWait(quietWait - 1)
	assert.False(t, p.quiet.Load(), "a wait just short of quietWait")
	p.noteWait(quietWait)
	assert.True(t, p.quiet.Load(), "a wait of quietWait")
	p.noteWait(100 * time.Nanosecond)
	assert.False(t, p.quiet.Load(), "the next message came at once: a stream")
}

// On a quiet partition a call first in the queue parks without yielding,
// and the owner parks without yielding after that lone message; a call
// with others queued ahead, an owner that handled more than one message,
// and every call and owner of a partition that is not quiet yield as
// before (yield.go).
func TestWhoYieldsOnAQuietPartition(t *testing.T) {
	p, _ := ownedPartition(t, t.Context(), Config{})
	p.quiet.Store(true)
	assert.False(t, p.callerYields(true), "quiet, nothing ahead")
	assert.True(t, p.callerYields(false), "quiet, others ahead")
	p.waitedAt, p.nHandled = 7, 8
	assert.False(t, p.yieldsOutOfWork(), "quiet, one message")
	p.nHandled = 9
	assert.True(t, p.yieldsOutOfWork(), "quiet, two messages")

	p.quiet.Store(false)
	assert.True(t, p.callerYields(true), "a stream, nothing ahead")
	p.nHandled = 8
	assert.True(t, p.yieldsOutOfWork(), "a stream, one message")
}

// waitParkedFor returns once p's owner has been parked for at least d,
// as far as the caller can tell: it saw the owner parked d ago, and no
// message has been sent to it since.
func waitParkedFor(p *partition, d time.Duration) {
	for !p.parked.Load() {
		runtime.Gosched()
	}
	for at := time.Now(); time.Since(at) < d; {
		runtime.Gosched()
	}
}

// A started silo's owner times its waits on the real clock: one that has
// waited long for a call leaves its partition quiet as it answers it.
// With any other clock it does not time them, and no partition is quiet:
// a test's clock decides nothing here.
func TestAnOwnerThatWaitedLongForACallLeavesItsPartitionQuiet(t *testing.T) {
	for _, real := range []bool{true, false} {
		cfg := Config{Partitions: 1}
		if !real {
			cfg.Clock = clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		}
		s, err := New(cfg)
		require.NoError(t, err)
		require.NoError(t, Register(s, "k", func(grain.ID) *nopGrain { return &nopGrain{} }))
		require.NoError(t, s.Start())
		ctx := t.Context()
		id := grain.NewID("k", "a")
		_, err = s.Ask(ctx, id, 1) // activates it
		require.NoError(t, err)
		p := s.parts[0]
		waitParkedFor(p, 20*quietWait)
		_, err = s.Ask(ctx, id, 2)
		require.NoError(t, err)
		assert.Equal(t, real, p.quiet.Load(), "real clock: %v", real)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		require.NoError(t, s.Shutdown(sctx))
		cancel()
	}
}
