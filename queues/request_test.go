package queues_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/queues"
)

// An outcome resolved before the caller looks is taken from the request,
// the first Resolve's; one resolved after the caller said it waits comes
// on the channel it gave.
func TestRequestHandsTheOutcomeOverInPlaceOrOnTheChannel(t *testing.T) {
	r := &queues.Request{}
	r.InitWith(t.Context(), nil, nil)
	_, ok := r.Take()
	require.False(t, ok, "nothing to take before Resolve")
	r.Resolve(1, nil)
	r.Resolve(2, nil)
	res, ok := r.Take()
	require.True(t, ok)
	assert.Equal(t, 1, res.Value, "the first Resolve's outcome")

	w := &queues.Request{}
	w.InitWith(t.Context(), nil, nil)
	done := make(chan queues.Result, 1)
	ch := w.DoneOn(done)
	w.Resolve(3, nil)
	w.Resolve(4, nil)
	assert.Equal(t, 3, (<-ch).Value)
	assert.Empty(t, done, "one outcome, once")
	_, ok = w.Take()
	assert.False(t, ok, "an outcome sent on the channel is not in the request")
}

// Done works whenever it is called: before the outcome, after it (the
// outcome moves to the channel), and more than once.
func TestRequestDoneBeforeAndAfterResolve(t *testing.T) {
	before := queues.NewRequest(t.Context(), nil)
	ch := before.Done()
	before.Resolve("b", nil)
	assert.Equal(t, "b", (<-ch).Value)

	after := queues.NewRequest(t.Context(), nil)
	after.Resolve("a", nil)
	assert.Equal(t, "a", (<-after.Done()).Value)
	assert.Empty(t, after.Done(), "a second Done sends nothing again")
}

// A caller that looks, then waits, while two Resolves race it, gets exactly
// one outcome, one of theirs, and never hangs: the handover's states are
// taken by compare-and-swap on both sides.
func TestRequestHandoverUnderRaces(t *testing.T) {
	for i := range 20_000 {
		r := &queues.Request{}
		r.InitWith(t.Context(), nil, nil)
		var resolvers sync.WaitGroup
		for v := range 2 {
			resolvers.Go(func() { r.Resolve(v, nil) })
		}
		var got queues.Result
		if res, ok := r.Take(); ok {
			got = res
		} else {
			done := make(chan queues.Result, 1)
			select {
			case got = <-r.DoneOn(done):
			case <-time.After(10 * time.Second): // a guard, not a wait: the outcome is due at once
				t.Fatalf("round %d: the caller waited for an outcome that never came", i)
			}
			resolvers.Wait()
			require.Empty(t, done, "round %d: a second outcome on the channel", i)
		}
		resolvers.Wait()
		require.Contains(t, []any{0, 1}, got.Value, "round %d", i)
	}
}

// Abandoning is a mark beside the handover, kept whatever the outcome
// does: a caller that gave up may still find the outcome it raced, and a
// request is resolved from the moment a Resolve begins, whoever waits.
func TestRequestAbandonedAndResolvedSurviveEachOther(t *testing.T) {
	r := &queues.Request{}
	r.InitWith(t.Context(), nil, nil)
	assert.False(t, r.Abandoned())
	assert.False(t, r.Resolved())
	r.Abandon()
	assert.True(t, r.Abandoned())
	assert.False(t, r.Resolved(), "abandoned is not resolved")
	r.Resolve(5, nil)
	assert.True(t, r.Abandoned(), "a Resolve keeps the mark")
	assert.True(t, r.Resolved())
	res, ok := r.Take()
	require.True(t, ok, "the outcome of an abandoned request is still in it")
	assert.Equal(t, 5, res.Value)

	w := &queues.Request{}
	w.InitWith(t.Context(), nil, nil)
	done := make(chan queues.Result, 1)
	ch := w.DoneOn(done)
	assert.False(t, w.Resolved(), "waiting is not resolved")
	w.Abandon()
	w.Resolve(6, nil)
	assert.True(t, w.Resolved())
	assert.True(t, w.Abandoned())
	assert.Equal(t, 6, (<-ch).Value, "sent to the channel whatever the mark")

	// The mark and a Resolve racing: neither is lost.
	for i := range 20_000 {
		r := &queues.Request{}
		r.InitWith(t.Context(), nil, nil)
		var wg sync.WaitGroup
		wg.Go(func() { r.Resolve(i, nil) })
		r.Abandon()
		wg.Wait()
		require.True(t, r.Abandoned(), "round %d", i)
		res, ok := r.Take()
		require.True(t, ok, "round %d", i)
		require.Equal(t, i, res.Value, "round %d", i)
	}
}

// Where a request waits is kept beside the handover as the abandoned mark
// is: set or moved while the outcome is written, neither is lost.
func TestRequestQueuedAtSurvivesTheHandover(t *testing.T) {
	r := &queues.Request{}
	r.InitWith(t.Context(), nil, nil)
	_, ok := r.QueuedAt()
	assert.False(t, ok, "nowhere yet")
	r.SetQueuedAt(0)
	at, ok := r.QueuedAt()
	require.True(t, ok)
	assert.Equal(t, 0, at)
	r.SetQueuedAt(65_534)
	at, ok = r.QueuedAt()
	require.True(t, ok)
	assert.Equal(t, 65_534, at, "the largest the word holds")
	r.SetQueuedAt(65_535)
	_, ok = r.QueuedAt()
	assert.False(t, ok, "too large: unknown, not another partition")
	r.SetQueuedAt(-1)
	_, ok = r.QueuedAt()
	assert.False(t, ok)

	for i := range 20_000 {
		r := &queues.Request{}
		r.InitWith(t.Context(), nil, nil)
		var wg sync.WaitGroup
		wg.Go(func() { r.Resolve(i, nil) })
		wg.Go(r.Abandon)
		r.SetQueuedAt(i % 7)
		wg.Wait()
		at, ok := r.QueuedAt()
		require.True(t, ok, "round %d", i)
		require.Equal(t, i%7, at, "round %d", i)
		require.True(t, r.Abandoned(), "round %d", i)
		res, ok := r.Take()
		require.True(t, ok, "round %d", i)
		require.Equal(t, i, res.Value, "round %d", i)
	}
}
