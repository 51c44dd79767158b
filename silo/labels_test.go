package silo_test

import (
	"bytes"
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// blocker holds its turn, and a goroutine it starts, until release closes.
type blocker struct{}

type labelHold struct{ in, release chan struct{} }

func (blocker) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if h, ok := msg.(labelHold); ok {
		child := make(chan struct{})
		go func() { // inherits the turn's labels
			defer close(child)
			<-h.release
		}()
		close(h.in)
		<-h.release
		<-child
	}
	return nil, nil
}

// goroutineProfile is the goroutine profile with each goroutine's labels.
func goroutineProfile(t *testing.T) string {
	var b bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	return b.String()
}

// With Config.ProfileLabels, the goroutine running a turn, and those its
// handler starts, carry the grain's kind as a pprof label: a profile says
// which kinds the time went to.
func TestProfileLabelsNameTheKind(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) { profileLabels(t, on) })
	}
}

func profileLabels(t *testing.T, on bool) {
	s := newSilo(t, silo.Config{Partitions: 1, ProfileLabels: on}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "player", func(grain.ID) blocker { return blocker{} }))
		require.NoError(t, silo.Register(s, "match", func(grain.ID) blocker { return blocker{} }))
	})
	ctx := ctxT(t)
	// One partition: its goroutine goes from kind to kind, and relabels.
	for _, k := range []string{"player", "match", "player"} {
		waitGone(t, "silo_test.blocker.Receive")
		h := labelHold{in: make(chan struct{}), release: make(chan struct{})}
		require.NoError(t, s.Tell(ctx, grain.NewID(k, "a"), h))
		<-h.in
		prof := goroutineProfile(t)
		close(h.release)
		_, err := s.Ask(ctx, grain.NewID(k, "a"), "after") // the turn is over
		require.NoError(t, err)
		if !on {
			turn := labelsOf(prof, "blocker.Receive")
			assert.Len(t, turn, 2, "the turn's goroutine and its child:\n%s", prof)
			for _, l := range turn {
				assert.Empty(t, l, "labels are off by default")
			}
			continue
		}
		want := `"` + silo.ProfileLabelKind + `":"` + k + `"`
		assert.GreaterOrEqual(t, strings.Count(prof, want), 2, "the turn's goroutine and its child, labeled %s:\n%s", k, prof)
	}
}

// awaiter waits, letting others in, for its release; the turns that come
// meanwhile run interleaved, each on a goroutine of its own.
type awaiter struct{ blocker }

type awaitRelease chan struct{}

func (g awaiter) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if r, ok := msg.(awaitRelease); ok {
		return nil, silo.Await(ctx, func() error { <-r; return nil })
	}
	return g.blocker.Receive(ctx, c, msg)
}

// waitGone returns once no goroutine's stack holds fn. A turn's goroutines
// that were let go — this test's last round's, or an earlier test's, on a
// silo of its own and maybe with labels on — may not have exited yet: a
// profile taken now would count them with the next turn's (a child of the
// last test's labeled turn, caught between closing its channel and
// exiting, failed the unlabeled round's count once in a stress run).
func waitGone(t *testing.T, fn string) {
	t.Helper()
	for i := 0; len(labelsOf(goroutineProfile(t), fn)) > 0; i++ {
		require.Less(t, i, 100_000, "goroutines running %s never exited:\n%s", fn, goroutineProfile(t))
		runtime.Gosched()
	}
}

// labelsOf returns the label line ("" for none) of each goroutine in a
// goroutine profile whose stack holds fn.
func labelsOf(prof, fn string) []string {
	var out []string
	for _, g := range strings.Split(prof, "\n\n") {
		if !strings.Contains(g, fn) {
			continue
		}
		label := ""
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, "# labels: ") {
				label = line
			}
		}
		out = append(out, label)
	}
	return out
}

// An interleaved turn runs on a goroutine of its own, from a pool that
// served other kinds: labeled with its own kind.
func TestProfileLabelsNameTheKindOfAnInterleavedTurn(t *testing.T) {
	s := newSilo(t, silo.Config{Partitions: 1, ProfileLabels: true}, func(s *silo.Silo) {
		for _, k := range []string{"hall", "room"} {
			require.NoError(t, silo.Register(s, k, func(grain.ID) awaiter { return awaiter{} }, silo.WithReentrant()))
		}
	})
	ctx := ctxT(t)
	for _, k := range []string{"hall", "room", "hall", "room"} {
		waitGone(t, "silo_test.blocker.Receive")
		id := grain.NewID(k, "a")
		release := make(awaitRelease)
		require.NoError(t, s.Tell(ctx, id, release))
		h := labelHold{in: make(chan struct{}), release: make(chan struct{})}
		require.NoError(t, s.Tell(ctx, id, h)) // in while the first turn awaits
		<-h.in
		prof := goroutineProfile(t)
		close(h.release)
		close(release)
		_, err := s.Ask(ctx, id, "after")
		require.NoError(t, err)
		want := `# labels: {"` + silo.ProfileLabelKind + `":"` + k + `"}`
		got := labelsOf(prof, "silo_test.blocker.Receive+")
		require.Len(t, got, 1, prof)
		assert.Equal(t, want, got[0], "the interleaved turn's goroutine")
		assert.Equal(t, []string{want}, labelsOf(prof, "silo_test.blocker.Receive.func1"), "its child")
		assert.Equal(t, []string{want}, labelsOf(prof, "silo_test.awaiter.Receive.func1"), "the awaiting turn's")
		// The goroutine that ran this round's wait may still be on its way
		// out, its result delivered: the next round's profile must not
		// find it.
		waitGone(t, "silo_test.awaiter.Receive.func1")
	}
}
