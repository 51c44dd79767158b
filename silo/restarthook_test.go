package silo_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// resHolder is a grain that holds a resource from OnActivate to OnDeactivate
// — a subscription, a file — as an Akka actor does from preStart to
// postStop: the test counts what is held, and what each OnDeactivate saw.
type resHolder struct {
	res      *resources
	instance int
	wait     <-chan struct{}
}

type resources struct {
	mu     sync.Mutex
	held   int
	built  int
	hooks  []hookSeen
	hookIn chan struct{} // told as an OnDeactivate begins
}

type hookSeen struct {
	instance   int
	why        grain.DeactivationReason
	timerError error
}

type (
	crashNow   struct{}
	reasonNow  struct{}
	timerStart struct{}
	instanceOf struct{}
	// holdThenCrash: the turn waits until the channel is closed, then panics
	holdThenCrash <-chan struct{}
)

func (h *resHolder) OnActivate(context.Context, *grain.Context) error {
	h.res.mu.Lock()
	h.res.held++
	h.res.mu.Unlock()
	return nil
}

func (h *resHolder) OnDeactivate(_ context.Context, c *grain.Context) error {
	seen := hookSeen{h.instance, c.DeactivationReason(), c.StartTimer("late", time.Hour, 0, "x")}
	h.res.mu.Lock()
	h.res.held--
	h.res.hooks = append(h.res.hooks, seen)
	h.res.mu.Unlock()
	if h.res.hookIn != nil {
		h.res.hookIn <- struct{}{}
	}
	if h.wait != nil {
		<-h.wait
	}
	return nil
}

func (h *resHolder) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case crashNow:
		panic("resHolder: crash")
	case reasonNow:
		return c.DeactivationReason(), nil
	case timerStart:
		return nil, c.StartTimer("t", time.Hour, 0, "tick")
	case instanceOf:
		return h.instance, nil
	case holdThenCrash:
		<-m
		panic("resHolder: crash after a hold")
	}
	return nil, nil
}

func (r *resources) snapshot() (held int, hooks []hookSeen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held, append([]hookSeen(nil), r.hooks...)
}

// holderSilo registers the resHolder kind; the instances numbered first
// wait in OnDeactivate until wait is closed (none if wait is nil).
func holderSilo(t *testing.T, cfg silo.Config, res *resources, wait <-chan struct{}, first int, opts ...silo.KindOption) *silo.Silo {
	cfg.Logger = newTextLogger(io.Discard)
	return newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "holder", func(grain.ID) *resHolder {
			res.mu.Lock()
			defer res.mu.Unlock()
			res.built++
			h := &resHolder{res: res, instance: res.built}
			if res.built <= first {
				h.wait = wait
			}
			return h
		}, opts...))
	})
}

// A restart runs the failed instance's OnDeactivate before the fresh one's
// OnActivate, as Akka runs postStop before a restart: what the instance
// held is let go, once — not leaked at every panic. The hook is told why
// (DeactivationFailed: not to save the suspect state) and may start no
// timer; the fresh instance is told nothing and may. A restart is counted
// as one, not as a deactivation.
func TestARestartRunsTheFailedInstancesOnDeactivate(t *testing.T) {
	res := &resources{}
	s := holderSilo(t, silo.Config{}, res, nil, 0)
	ctx, id := ctxT(t), grain.NewID("holder", "h")
	for range 3 {
		_, err := s.Ask(ctx, id, crashNow{})
		require.ErrorIs(t, err, grain.ErrPanic)
	}
	n, err := silo.Call[int](ctx, s, id, instanceOf{})
	require.NoError(t, err)
	require.Equal(t, 4, n, "a fresh instance after each crash")
	held, hooks := res.snapshot()
	require.Equal(t, 1, held, "each failed instance let go of what it held")
	for i, h := range hooks {
		assert.Equal(t, i+1, h.instance)
		assert.Equal(t, grain.DeactivationFailed, h.why)
		assert.ErrorIs(t, h.timerError, grain.ErrDeactivating)
	}
	require.Len(t, hooks, 3)

	why, err := silo.Call[grain.DeactivationReason](ctx, s, id, reasonNow{})
	require.NoError(t, err)
	assert.Equal(t, grain.DeactivationNone, why, "the fresh instance is not deactivating")
	_, err = s.Ask(ctx, id, timerStart{})
	assert.NoError(t, err, "nor is it refused timers")

	st := s.Stats()
	assert.Equal(t, uint64(3), st.Restarts)
	assert.Zero(t, st.Deactivations[grain.DeactivationFailed], "a restart is no deactivation")
	assert.Equal(t, 1, st.Activations["holder"])
}

// Messages sent while the failed instance's OnDeactivate runs wait for the
// fresh instance, in order; a Stop that comes meanwhile makes the grain
// go instead, its messages sent before the Stop dead letters; a
// Deactivate that comes meanwhile makes it go too, as any deactivation
// does: what waits goes to a fresh activation.
func TestWhatComesWhileTheFailedInstancesHookRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		meddle  func(ctx context.Context, s *silo.Silo, id grain.ID) error
		instAft int // the instance that answers afterwards
	}{
		{"nothing", nil, 2},
		{"stop", func(ctx context.Context, s *silo.Silo, id grain.ID) error { return s.Stop(ctx, id) }, 2},
		{"deactivate", func(ctx context.Context, s *silo.Silo, id grain.ID) error { return s.Deactivate(ctx, id) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait := make(chan struct{})
			res := &resources{hookIn: make(chan struct{}, 8)}
			s := holderSilo(t, silo.Config{}, res, wait, 1)
			dead := s.SubscribeDeadLetters(16)
			defer dead.Cancel()
			ctx, id := ctxT(t), grain.NewID("holder", "h")
			_, err := s.Ask(ctx, id, crashNow{})
			require.ErrorIs(t, err, grain.ErrPanic)
			<-res.hookIn // the failed instance's hook runs, and waits
			require.NoError(t, s.Tell(ctx, id, "queued"))
			answer := make(chan error, 1)
			go func() { _, err := s.Ask(ctx, id, instanceOf{}); answer <- err }()
			waitBacklog(t, s, 2) // both wait for the fresh instance
			if tc.meddle != nil {
				require.NoError(t, tc.meddle(ctx, s, id))
			}
			close(wait)
			if tc.name == "stop" {
				// Sent before the Stop: dead letters; the ask fails at once.
				require.ErrorIs(t, <-answer, grain.ErrGrainStopped)
				var reasons []grain.Reason
				for range 2 {
					reasons = append(reasons, (<-dead.C).Reason)
				}
				assert.Equal(t, []grain.Reason{grain.ReasonStopped, grain.ReasonStopped}, reasons)
			} else {
				require.NoError(t, <-answer)
			}
			n, err := silo.Call[int](ctx, s, id, instanceOf{})
			require.NoError(t, err)
			assert.Equal(t, tc.instAft, n)
			_, hooks := res.snapshot()
			require.NotEmpty(t, hooks)
			assert.Equal(t, grain.DeactivationFailed, hooks[0].why)
			require.Len(t, hooks, 1, "the failed instance's hook, once")
			if tc.name == "deactivate" {
				assert.Equal(t, uint64(1), s.Stats().Deactivations[grain.DeactivationRequested], "a deactivation, not a restart")
			} else {
				assert.Empty(t, s.Stats().Deactivations)
			}
			assert.Empty(t, dead.C, "nothing else lost")
		})
	}
}

// A failed instance's OnDeactivate that overruns DeactivationTimeout is
// given up on as any: the grain's messages go to a fresh instance once the
// restart's backoff has passed, which keeps the restart history — a grain
// that keeps failing is still stopped at its limit, though each hook
// before a restart hangs.
func TestAnOverrunningHookBeforeARestartKeepsTheRestartLimit(t *testing.T) {
	wait := make(chan struct{})
	defer close(wait)
	res := &resources{hookIn: make(chan struct{}, 8)}
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sup := activation.Supervision{MaxRestarts: 2, Window: time.Hour, Quarantine: time.Hour}
	s := holderSilo(t, silo.Config{Clock: clk, DeactivationTimeout: time.Second}, res, wait, 1<<30, silo.WithSupervision(sup))
	ctx, id := ctxT(t), grain.NewID("holder", "h")
	ask := func() <-chan error {
		r := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := s.Ask(ctx, id, crashNow{})
			r <- err
		}()
		return r
	}
	require.ErrorIs(t, <-ask(), grain.ErrPanic) // restart 1
	for i := 2; i <= 3; i++ {
		<-res.hookIn // the failed instance's hook hangs
		r := ask()
		waitBacklog(t, s, 1)
		clk.Advance(2 * time.Second)            // given up on
		_, err := s.ActiveGrains(ctx, "holder") // a barrier: the owner has given up on it
		require.NoError(t, err)
		clk.Advance(time.Second) // the backoff (10 ms, 20 ms) passed: the crash goes to a fresh instance
		require.ErrorIs(t, <-r, grain.ErrPanic, "crash %d", i)
	}
	<-res.hookIn // crash 3 passed the limit of two restarts: stopped
	var dl *grain.DeadLetterError
	require.ErrorAs(t, <-ask(), &dl)
	require.Equal(t, grain.ReasonQuarantined, dl.Reason)
	_, hooks := res.snapshot()
	require.Len(t, hooks, 3)
	for _, h := range hooks {
		assert.Equal(t, grain.DeactivationFailed, h.why)
	}
}

// minuteBackoffSilo is holderSilo on a manual clock, with partitions
// partitions (0: the default), a DeactivationTimeout of a second, and
// restarts (but the first) a minute apart; the instances numbered first
// hang in OnDeactivate until the test ends.
func minuteBackoffSilo(t *testing.T, partitions, first int) (*silo.Silo, *resources, *clock.Manual) {
	wait := make(chan struct{})
	t.Cleanup(func() { close(wait) })
	res := &resources{hookIn: make(chan struct{}, 8)}
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sup := activation.Supervision{MaxRestarts: 5, Window: time.Hour, MinBackoff: time.Minute, MaxBackoff: time.Minute, Quarantine: time.Hour}
	cfg := silo.Config{Clock: clk, DeactivationTimeout: time.Second, Partitions: partitions}
	return holderSilo(t, cfg, res, wait, first, silo.WithSupervision(sup)), res, clk
}

// The restart a failed instance's OnDeactivate came before still waits out
// its backoff when the hook overruns DeactivationTimeout and is given up
// on, as after a hook that ends in time: the fresh instance is built once
// the backoff has passed. (It was built at once, so a grain failing with
// a hook that hangs — a save to a database that is down — restarted every
// DeactivationTimeout, whatever its MaxBackoff.)
func TestAnOverrunningHookBeforeARestartStillWaitsOutTheBackoff(t *testing.T) {
	s, res, clk := minuteBackoffSilo(t, 1, 2)
	ctx, id, other := ctxT(t), grain.NewID("holder", "h"), grain.NewID("holder", "other")
	ask := func(msg any) <-chan error {
		r := make(chan error, 1)
		go func() {
			_, err := s.Ask(ctx, id, msg)
			r <- err
		}()
		return r
	}
	built := func() int {
		res.mu.Lock()
		defer res.mu.Unlock()
		return res.built
	}
	require.ErrorIs(t, <-ask(crashNow{}), grain.ErrPanic) // restart 1: no backoff
	<-res.hookIn                                          // instance 1's hook hangs
	r := ask(crashNow{})
	waitBacklog(t, s, 1)
	clk.Advance(2 * time.Second)            // given up on: instance 2 at once
	require.ErrorIs(t, <-r, grain.ErrPanic) // restart 2: a minute's backoff
	<-res.hookIn                            // instance 2's hook hangs too

	r = ask(instanceOf{})
	waitBacklog(t, s, 1)
	clk.Advance(2 * time.Second) // given up on: the backoff begins
	for range 2 {                // rounds of the partition, which would have built it
		_, err := s.Ask(ctx, other, instanceOf{})
		require.NoError(t, err)
	}
	select {
	case err := <-r:
		t.Fatalf("answered during the backoff (%v)", err)
	default:
	}
	require.Equal(t, 3, built(), "instances 1 and 2, and other's: none for h yet")
	clk.Advance(59 * time.Second)
	_, err := s.ActiveGrains(ctx, "holder")
	require.NoError(t, err)
	require.Empty(t, r, "a second short of the backoff")
	clk.Advance(time.Second)
	require.NoError(t, <-r, "answered by the fresh instance")
	require.Equal(t, 4, built())
}

// A grain asked to go while its failed instance's OnDeactivate runs goes,
// rather than restart, when the hook overruns and is given up on, as when
// it ends in time: no backoff holds its next message, which activates it
// afresh.
func TestAGrainAskedToGoWhileItsOverrunningHookRanGoes(t *testing.T) {
	s, res, clk := minuteBackoffSilo(t, 0, 1<<30)
	ctx, id := ctxT(t), grain.NewID("holder", "h")
	_, err := s.Ask(ctx, id, crashNow{})
	require.ErrorIs(t, err, grain.ErrPanic) // restart 1: no backoff
	<-res.hookIn                            // instance 1's hook hangs
	clk.Advance(2 * time.Second)            // given up on
	_, err = s.Ask(ctx, id, crashNow{})
	require.ErrorIs(t, err, grain.ErrPanic) // restart 2: a minute's backoff
	<-res.hookIn                            // instance 2's hook hangs too
	require.NoError(t, s.Deactivate(ctx, id))
	_, err = s.ActiveGrains(ctx, "holder") // a barrier: the owner has taken the Deactivate
	require.NoError(t, err)
	clk.Advance(2 * time.Second) // given up on
	_, err = s.ActiveGrains(ctx, "holder")
	require.NoError(t, err)
	got, err := s.Ask(ctx, id, instanceOf{})
	require.NoError(t, err, "no backoff: the grain went")
	assert.Equal(t, 3, got)
	assert.Equal(t, uint64(1), s.Stats().Deactivations[grain.DeactivationRequested])
}

// A grain asked to go while the turn that fails runs (a Silo.Deactivate or
// a Silo.Stop, taken by the partition's next owner while the turn blocks)
// goes as asked: its OnDeactivate runs once, told of the failure — its
// state is suspect, whatever asked it to go — and no fresh instance is
// built for it: the next message activates one.
func TestAGrainAskedToGoWhileItsTurnFailedGoes(t *testing.T) {
	for _, ask := range []string{"deactivate", "stop"} {
		t.Run(ask, func(t *testing.T) { askedToGoWhileItsTurnFailed(t, ask) })
	}
}

func askedToGoWhileItsTurnFailed(t *testing.T, ask string) {
	res := &resources{hookIn: make(chan struct{}, 8)}
	s := holderSilo(t, silo.Config{}, res, nil, 0)
	ctx, id := ctxT(t), grain.NewID("holder", "h")
	release := make(chan struct{})
	failed := make(chan error, 1)
	go func() { _, err := s.Ask(ctx, id, holdThenCrash(release)); failed <- err }()
	require.Eventually(t, func() bool { return s.Stats().Handoffs > 0 }, 10*time.Second, 100*time.Microsecond,
		"the turn blocks, handed off")
	if ask == "stop" {
		require.NoError(t, s.Stop(ctx, id))
	} else {
		require.NoError(t, s.Deactivate(ctx, id))
	}
	_, err := s.ActiveGrains(ctx, "holder") // a barrier: the partition's owner has taken the Deactivate
	require.NoError(t, err)
	close(release)
	require.ErrorIs(t, <-failed, grain.ErrPanic)
	<-res.hookIn
	require.Eventually(t, func() bool {
		ids, err := s.ActiveGrains(ctx, "holder")
		return err == nil && len(ids) == 0
	}, 10*time.Second, 100*time.Microsecond, "gone, as the Deactivate asked")
	_, hooks := res.snapshot()
	require.Len(t, hooks, 1)
	assert.Equal(t, grain.DeactivationFailed, hooks[0].why)
	assert.Equal(t, uint64(1), s.Stats().Deactivations[grain.DeactivationFailed])
	n, err := silo.Call[int](ctx, s, id, instanceOf{})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the next message activates a fresh instance")
}
