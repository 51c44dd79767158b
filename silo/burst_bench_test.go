package silo_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// askersDuring starts a burst, then has four callers ask "live" grains in
// a loop until the burst is over (each caller looks, every 64 asks), and
// reports the worst and the 99.9th percentile of their asks' latencies, in
// µs: how long the owner's own work held the grains it did not concern.
func askersDuring(b *testing.B, s *silo.Silo, start func(), over func() bool) {
	b.Helper()
	ctx := context.Background()
	var lat []time.Duration
	var mu sync.Mutex
	var done atomic.Bool
	var wg sync.WaitGroup
	start()
	for i := range 4 {
		id := grain.NewIntID("live", int64(i))
		wg.Go(func() {
			var mine []time.Duration
			for n := 1; !done.Load(); n++ {
				t0 := time.Now()
				if _, err := s.Ask(ctx, id, 0); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
				if n%64 == 0 && over() {
					done.Store(true)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-ask-µs")
	b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds()), "p999-ask-µs")
}

// burstSilo is a started silo on a manual clock with kind "live", whose
// grains never go idle (the askers'), and the kinds reg registers.
func burstSilo(b *testing.B, cfg silo.Config, reg func(*silo.Silo) error) (*silo.Silo, *clock.Manual) {
	b.Helper()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg.Clock = clk
	s, err := silo.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "live", func(grain.ID) *benchGrain { return &benchGrain{} }, silo.WithIdleTimeout(-1)); err != nil {
		b.Fatal(err)
	}
	if err := reg(s); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, clk
}

// BenchmarkIdleBurst: b.N grains go idle at once — sessions that ended
// together — while four callers ask other grains of their partitions; the
// time per grain to deactivate them all, and how long the callers waited
// at worst (max-ask-µs) and at the 99.9th percentile. /hooked: each grain
// has an OnDeactivate.
func BenchmarkIdleBurst(b *testing.B) {
	for _, name := range []string{"plain", "hooked"} {
		b.Run(name, func(b *testing.B) {
			s, clk := burstSilo(b, silo.Config{IdleTimeout: time.Minute, IdleQuantum: time.Second}, func(s *silo.Silo) error {
				if name == "plain" {
					return silo.Register(s, "burst", func(grain.ID) *benchGrain { return &benchGrain{} })
				}
				return silo.Register(s, "burst", func(grain.ID) *deactHooked { return &deactHooked{} })
			})
			ctx := context.Background()
			for i := range b.N { // asks: every grain is active once they are answered
				if _, err := s.Ask(ctx, grain.NewIntID("burst", int64(i)), incrMsg); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			askersDuring(b, s,
				func() { clk.Advance(time.Minute + time.Second) },
				func() bool { return s.Stats().Deactivations[grain.DeactivationIdle] >= uint64(b.N) })
		})
	}
}

// burstTickGrain starts a one-shot timer due in a second on its first
// message, and counts its tick.
type burstTickGrain struct {
	benchGrain
	ticks *atomic.Int64
}

func (g *burstTickGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch msg {
	case "start":
		return nil, c.StartTimer("t", time.Second, 0, "tick")
	case "tick":
		g.ticks.Add(1)
		return nil, nil
	}
	return g.benchGrain.Receive(ctx, c, msg)
}

// BenchmarkTickBurst: the timers of b.N grains, started together, fall due
// together while four callers ask other grains of their partitions; the
// time per tick, and how long the callers waited at worst (max-ask-µs) and
// at the 99.9th percentile.
func BenchmarkTickBurst(b *testing.B) {
	var ticks atomic.Int64
	s, clk := burstSilo(b, silo.Config{IdleTimeout: -1}, func(s *silo.Silo) error {
		return silo.Register(s, "burst", func(grain.ID) *burstTickGrain { return &burstTickGrain{ticks: &ticks} })
	})
	ctx := context.Background()
	for i := range b.N { // asks: every timer has started, at the same time, once they are answered
		if _, err := s.Ask(ctx, grain.NewIntID("burst", int64(i)), "start"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	askersDuring(b, s,
		func() { clk.Advance(time.Second) },
		func() bool { return ticks.Load() >= int64(b.N) })
}

// BenchmarkFloodedAsk: eight senders tell grains in a loop, as fast as the
// partitions take them, b.N tells in all, while four callers ask other
// grains of the same partitions; the time per tell, and how long the
// callers waited at worst (max-ask-µs) and at the 99.9th percentile. The
// partition queues are full for the whole run: each caller waits for room,
// then for the messages ahead of its own — and the drain that wakes it
// holds room for it, so the senders in their loops cannot take it first.
func BenchmarkFloodedAsk(b *testing.B) {
	s, _ := burstSilo(b, silo.Config{IdleTimeout: -1}, func(s *silo.Silo) error {
		return silo.Register(s, "burst", func(grain.ID) *benchGrain { return &benchGrain{} })
	})
	ctx := context.Background()
	var told atomic.Int64
	var flood sync.WaitGroup
	b.ResetTimer()
	askersDuring(b, s,
		func() {
			for f := range 8 {
				flood.Go(func() {
					for i := f; told.Add(1) <= int64(b.N); i += 8 {
						if err := s.Tell(ctx, grain.NewIntID("burst", int64(i%10_000)), incrMsg); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
		},
		func() bool { return told.Load() >= int64(b.N) })
	flood.Wait()
}
