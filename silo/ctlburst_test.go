package silo_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// laneHolder's turn holds its partition, running, until it is let go: the
// partition's control lane fills behind it (with no handoff before).
type laneHolder struct {
	spinning chan<- struct{}
	release  *atomic.Bool
}

func (g laneHolder) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "spin" {
		close(g.spinning)
		for !g.release.Load() {
			runtime.Gosched()
		}
	}
	return nil, nil
}

// A burst of control items — a crowd of Deactivates from outside, or of
// restarts whose backoffs ended together when each backoff pushed one —
// does not pin the partition's control lane at its high-water mark: the
// owner's two arrays for it, each grown to the burst, stayed for good
// (50,000 grains crashing at once: 14 MB held after every one of them was
// gone).
func TestABurstOfControlItemsLeavesNoArrayBehind(t *testing.T) {
	const burst = 100_000
	spinning := make(chan struct{})
	var release atomic.Bool
	// No handoff while the test runs: the burst waits behind the turn whole.
	s := newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "holder", func(grain.ID) laneHolder {
			return laneHolder{spinning: spinning, release: &release}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("holder", "s")
	_, err := s.Ask(ctx, id, "warm")
	require.NoError(t, err)
	before := heapInUse()

	require.NoError(t, s.Tell(ctx, id, "spin"))
	<-spinning
	for i := range burst { // none active: each is a control item, and nothing else
		require.NoError(t, s.Deactivate(ctx, grain.NewIntID("holder", int64(i))))
	}
	release.Store(true)
	for range 4 { // rounds after the burst's: each lane's array used again, barely
		_, err := s.Ask(ctx, id, "ping")
		require.NoError(t, err)
	}
	after := heapInUse()
	// The burst's arrays are over 10 MB each.
	require.Less(t, int64(after)-int64(before), int64(2<<20), "bytes held after the burst")
}

// pinger returns what asks id once: a round of its partition, after the
// messages sent before.
func pinger(ctx context.Context, t *testing.T, s *silo.Silo, id grain.ID) func() {
	return func() {
		_, err := s.Ask(ctx, id, "ping")
		require.NoError(t, err)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// failing panics in every turn.
type failing struct{}

func (failing) Receive(context.Context, *grain.Context, any) (any, error) {
	panic("failing: always")
}

// A crowd of grains stopped by supervision at once — each quarantined —
// leaves no room behind once their quarantines are over: the partition's
// map of quarantines kept the room of its largest size for good (a Go map
// never shrinks: 50,000 grains crashing at once held 1.6 MB).
func TestACrowdOfQuarantinesLeavesNoRoomBehind(t *testing.T) {
	const grains = 50_000
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleQuantum: time.Second, Logger: slog.New(slog.DiscardHandler)}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "failing", func(grain.ID) failing { return failing{} },
			silo.WithSupervision(activation.Supervision{MaxRestarts: -1, Quarantine: time.Minute})))
		require.NoError(t, silo.Register(s, "echo", func(grain.ID) grain.Func {
			return func(_ context.Context, _ *grain.Context, msg any) (any, error) { return msg, nil }
		}))
	})
	ctx := ctxT(t)
	ping := pinger(ctx, t, s, grain.NewID("echo", "e"))
	ping()
	before := heapInUse()
	for i := range grains {
		require.NoError(t, s.Tell(ctx, grain.NewIntID("failing", int64(i)), "boom"))
	}
	for s.Stats().Stops < grains {
		ping() // a round at a time, until every grain is stopped
	}
	clk.Advance(2 * time.Minute) // every quarantine over
	for range 4 {
		clk.Advance(time.Second) // idle ticks: the quarantines swept
		ping()
	}
	require.Zero(t, s.Stats().Activations["failing"])
	after := heapInUse()
	require.Less(t, int64(after)-int64(before), int64(1<<20), "bytes held after the quarantines")
}

// waitsFor's turns wait until its channel is closed, in Await: each
// hands its partition off at once.
type waitsFor struct{ release <-chan struct{} }

func (g waitsFor) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	err := silo.Await(ctx, func() error {
		<-g.release
		return nil
	})
	return msg, err
}

// A crowd of asks handled off the partition at once — each to a grain
// whose turn blocks — leaves no room behind once they are answered: the
// partition's map of them kept the room of its largest size for good.
func TestACrowdOfAsksHandedOffLeavesNoRoomBehind(t *testing.T) {
	const asks = 20_000
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	release := make(chan struct{})
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleQuantum: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "waits", func(grain.ID) waitsFor { return waitsFor{release} },
			silo.WithIdleTimeout(time.Minute)))
	})
	ctx := ctxT(t) // 20,000 asks of turns handed off: 3–7 s under -race alone, past 20 s beside busy loops
	ping := pinger(ctx, t, s, grain.NewID("waits", "ping"))
	close(release)
	ping()
	release = make(chan struct{})
	// The runtime keeps every goroutine it made for reuse: the callers',
	// and the partition's for the turns handed off, made first here.
	warm := make(chan struct{})
	var wwg sync.WaitGroup
	for range 3 * asks {
		wwg.Go(func() { <-warm })
	}
	close(warm)
	wwg.Wait()
	before := heapInUse()
	var wg sync.WaitGroup
	errs := make(chan error, asks)
	for i := range asks {
		wg.Go(func() {
			_, err := s.Ask(ctx, grain.NewIntID("waits", int64(i)), "hello")
			errs <- err
		})
	}
	for s.Stats().Handoffs < asks { // every turn waiting, its ask handed off
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	clk.Advance(2 * time.Minute) // every grain idle
	for s.Stats().Activations["waits"] > 1 {
		ping() // a round at a time, until every grain that waited is gone
	}
	for range 4 {
		clk.Advance(time.Second) // idle ticks: the map of asks handed off looked at
		ping()
	}
	after := heapInUse()
	require.Less(t, int64(after)-int64(before), int64(256<<10), "bytes held after the asks")
}

// ticking starts a timer at its first message.
type ticking struct{}

func (ticking) Receive(_ context.Context, c *grain.Context, msg any) (any, error) {
	if msg == "start" {
		return nil, c.StartTimer("t", time.Hour, time.Hour, "tick")
	}
	return nil, nil
}

// A crowd of timers, all gone with their grains, leaves no array behind:
// the partition's heap of timers kept the array of its largest size.
func TestACrowdOfTimersLeavesNoArrayBehind(t *testing.T) {
	const grains = 100_000
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSilo(t, silo.Config{Clock: clk, Partitions: 1, IdleQuantum: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "ticking", func(grain.ID) ticking { return ticking{} },
			silo.WithIdleTimeout(time.Minute)))
	})
	ctx := ctxT(t)
	ping := pinger(ctx, t, s, grain.NewID("ticking", "ping"))
	ping()
	before := heapInUse()
	askAll(t, s, "ticking", 0, grains, "start")
	clk.Advance(2 * time.Minute) // every grain idle, its timer with it
	for s.Stats().Activations["ticking"] > 1 {
		ping() // a round at a time, until every grain that ticked is gone
	}
	after := heapInUse()
	require.Less(t, int64(after)-int64(before), int64(256<<10), "bytes held after the timers")
}
