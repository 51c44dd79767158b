package silo

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// onOtherPartitions returns a relay and a callee on different partitions.
func onOtherPartitions(t *testing.T, s *Silo) (relay, callee grain.ID) {
	t.Helper()
	callee = grain.NewID("callee", "c")
	at := s.locator.LocateHash(callee.Hash()).Partition
	for i := range 64 {
		relay = grain.NewIntID("relay", int64(i))
		if s.locator.LocateHash(relay.Hash()).Partition != at {
			return relay, callee
		}
	}
	t.Fatal("no relay on another partition")
	return
}

// With the scheduler crowded or hogged, a turn that calls a grain of
// another partition hands its partition off at once: yielding first — for
// the answer to come while it yields, and save the handoff — it would hold
// the partition until every runnable goroutine had run, or a CPU-bound one
// had used up its time slice.
func TestACrowdedSchedulerMakesACallHandOffAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*watchdog)
	}{
		{"crowded", func(d *watchdog) { d.crowded.Store(true) }},
		{"hogged", func(d *watchdog) { d.hogged.Store(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testCallHandsOffAtOnce(t, tc.set) })
	}
}

func testCallHandsOffAtOnce(t *testing.T, set func(*watchdog)) {
	// The monitor never looks (an hour's threshold): the marks stay as set.
	s, err := New(Config{Partitions: 2, HandoffThreshold: time.Hour})
	require.NoError(t, err)
	var relay, callee grain.ID
	require.NoError(t, Register(s, "callee", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) { return 1, nil }
	}))
	require.NoError(t, Register(s, "relay", func(grain.ID) grain.Func {
		return func(ctx context.Context, gc *grain.Context, _ any) (any, error) {
			return Call[int](ctx, gc.Silo(), callee, 0)
		}
	}))
	require.NoError(t, s.Start())
	defer s.Close()
	relay, callee = onOtherPartitions(t, s)
	ctx := context.Background()
	_, err = Call[int](ctx, s, relay, 0) // both active
	require.NoError(t, err)

	set(&s.dog)
	const calls = 200
	before := s.Stats().Handoffs
	for range calls {
		_, err := Call[int](ctx, s, relay, 0)
		require.NoError(t, err)
	}
	require.Equal(t, uint64(calls), s.Stats().Handoffs-before, "calls that handed their partition off")
}

// The handoff monitor sees the scheduler crowded while goroutines keep
// waiting for a core, and not once they are gone.
func TestTheWatchdogSeesACrowdedScheduler(t *testing.T) {
	s, err := New(Config{Partitions: 1, HandoffThreshold: time.Millisecond})
	require.NoError(t, err)
	var stopLoop sync.Once
	loop := make(chan struct{})
	require.NoError(t, Register(s, "loop", func(grain.ID) grain.Func {
		return func(ctx context.Context, gc *grain.Context, _ any) (any, error) {
			select {
			case <-loop:
				return nil, nil
			default: // tell itself on: the owner stays awake, so the monitor looks
				return nil, gc.Silo().Tell(ctx, gc.ID(), 0)
			}
		}
	}))
	require.NoError(t, s.Start())
	defer s.Close()
	defer stopLoop.Do(func() { close(loop) })
	require.NoError(t, s.Tell(context.Background(), grain.NewID("loop", "l"), 0))

	end := startCrowd(4 * crowdedPerP * runtime.GOMAXPROCS(0))
	require.Eventually(t, s.dog.crowded.Load, 10*time.Second, time.Millisecond, "crowded, with goroutines waiting")
	end()
	require.Eventually(t, func() bool { return !s.dog.crowded.Load() }, 10*time.Second, time.Millisecond, "crowded, the crowd gone")
}

// startCrowd starts n goroutines that yield in a loop — always runnable,
// each running briefly — and returns what stops them and waits for them.
func startCrowd(n int) (end func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		})
	}
	return func() { close(stop); wg.Wait() }
}

// startHogs starts n CPU-bound goroutines, each holding its core until the
// scheduler preempts it, and returns what stops them and waits for them.
func startHogs(n int) (end func()) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := 0
			for !stop.Load() {
				for i := range 10_000 {
					x += i
				}
			}
			_ = x
		})
	}
	return func() { stop.Store(true); wg.Wait() }
}

// A program's CPU-bound goroutines stop the silo's yields: a yield waits
// for a whole time slice of one of them. The silo sees it from a yield's
// length, and yields again once the mark has run down.
func TestAProgramsCPUBoundGoroutinesStopTheYields(t *testing.T) {
	s, err := New(Config{Partitions: 1})
	require.NoError(t, err)
	require.NoError(t, Register(s, "g", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) { return 1, nil }
	}))
	require.NoError(t, s.Start())
	defer s.Close()
	endHogs := startHogs(2 * runtime.GOMAXPROCS(0))
	defer endHogs()
	ctx := context.Background()
	id := grain.NewID("g", "a")
	require.Eventually(t, func() bool {
		for range 100 { // each call yields, as its caller and as the owner out of work
			if _, err := Call[int](ctx, s, id, 0); err != nil {
				return false
			}
		}
		return s.dog.hogged.Load() > 0
	}, 20*time.Second, time.Millisecond, "a yield behind the CPU-bound goroutines")

	endHogs()
	require.Eventually(t, func() bool {
		_, err := Call[int](ctx, s, id, 0) // an owner awake: the monitor looks, and counts down
		return err == nil && s.dog.hogged.Load() == 0
	}, 20*time.Second, time.Millisecond, "the mark run down")
}

// A slow turn reported while the scheduler is crowded says so: its
// goroutine may have waited for a core rather than run.
func TestASlowTurnOnACrowdedSchedulerSaysSo(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	// The monitor never looks (an hour's threshold): crowded stays as set.
	s, err := New(Config{Partitions: 1, HandoffThreshold: time.Hour, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	defer s.Close()
	a := &act{}
	a.ID = grain.NewID("g", "slow")

	s.parts[0].reportSlow(a, 10*time.Millisecond, -1)
	s.dog.crowded.Store(true)
	s.parts[0].reportSlow(a, 10*time.Millisecond, -1)
	s.WaitLogged()
	mu.Lock()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	mu.Unlock()
	require.Len(t, lines, 2)
	require.NotContains(t, lines[0], "scheduler_crowded")
	require.Contains(t, lines[1], "scheduler_crowded=true")
	require.Equal(t, uint64(2), s.Stats().SlowTurns)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
