package silo_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// timedGrain starts an hour's repeating timer when told to.
type timedGrain struct{ ticks int }

type startHourly struct{}

func (g *timedGrain) Receive(_ context.Context, gc *grain.Context, msg any) (any, error) {
	switch msg.(type) {
	case startHourly:
		return nil, gc.StartTimer("hourly", time.Hour, time.Hour, incrMsg)
	case *benchIncr:
		g.ticks++
	}
	return nil, nil
}

// BenchmarkIdleGrainMemory reports the heap an idle grain holds (the grain's
// own struct included): /plain after one message, /timer after one that
// started a repeating timer (a session's heartbeat, a device's poll).
func BenchmarkIdleGrainMemory(b *testing.B) {
	for _, c := range []struct {
		name string
		msg  any
	}{{"plain", incrMsg}, {"timer", startHourly{}}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 20_000
			ctx := context.Background()
			var per float64
			for b.Loop() {
				s, err := silo.New(silo.Config{IdleTimeout: -1})
				if err != nil {
					b.Fatal(err)
				}
				if err := silo.Register(s, "t", func(grain.ID) *timedGrain { return &timedGrain{} }); err != nil {
					b.Fatal(err)
				}
				if err := s.Start(); err != nil {
					b.Fatal(err)
				}
				before := liveHeap()
				for i := range n {
					if _, err := s.Ask(ctx, grain.NewIntID("t", int64(i)), c.msg); err != nil {
						b.Fatal(err)
					}
				}
				per = float64(liveHeap()-before) / n
				s.Close()
			}
			b.ReportMetric(per, "bytes/grain")
		})
	}
}

// liveHeap returns the heap's live bytes after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// tickCounter counts its timer's ticks in a shared counter.
type tickCounter struct{ n *atomic.Int64 }

type startEager struct{}

func (g tickCounter) Receive(_ context.Context, gc *grain.Context, msg any) (any, error) {
	switch msg.(type) {
	case startEager:
		return nil, gc.StartTimer("eager", 0, time.Nanosecond, incrMsg)
	case *benchIncr:
		g.n.Add(1)
	}
	return nil, nil
}

// BenchmarkTimerTicks: the ticks of 1,000 grains' repeating timers, each
// due again as soon as its last tick's turn has ended: how many tick in
// the time an op, which waits for one, takes (ticks/op), and what they
// allocate.
func BenchmarkTimerTicks(b *testing.B) {
	const grains = 1000
	var n atomic.Int64
	s, err := silo.New(silo.Config{IdleTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := silo.Register(s, "t", func(grain.ID) tickCounter { return tickCounter{&n} }); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for i := range grains {
		if _, err := s.Ask(ctx, grain.NewIntID("t", int64(i)), startEager{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	start := n.Load()
	for b.Loop() {
		want := n.Load() + 1
		for n.Load() < want {
			runtime.Gosched()
		}
	}
	b.ReportMetric(float64(n.Load()-start)/float64(b.N), "ticks/op")
}

// putOff puts its timer off at every message: a write-behind save due a
// minute after the grain last changed (Akka's startSingleTimer with one
// key; a debounce).
type putOff struct{ n int }

func (g *putOff) Receive(_ context.Context, gc *grain.Context, msg any) (any, error) {
	switch msg.(type) {
	case *benchIncr:
		g.n++
		return nil, gc.StartTimer("save", time.Minute, 0, startHourly{})
	case get:
		return g.n, nil
	}
	return nil, nil
}

// BenchmarkTimerRestart: tells to 10,000 grains that each put their timer
// off at every message. A restart of a timer that waits in the heap moves
// nothing and allocates nothing (partition.restartTimer); it made a new
// timer, sifted twice through the heap and allocated, 400–550 ns and 220
// bytes a tell.
func BenchmarkTimerRestart(b *testing.B) {
	const grains = 10_000
	s := benchSilo(b, silo.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	sent := 0
	for b.Loop() {
		if err := tellRetry(ctx, s, grain.NewIntID("putoff", int64(sent%grains)), incrMsg); err != nil {
			b.Fatal(err)
		}
		sent++
	}
	b.StopTimer()
	total := 0
	for i := range min(sent, grains) {
		n, err := silo.Call[int](ctx, s, grain.NewIntID("putoff", int64(i)), get{})
		if err != nil {
			b.Fatal(err)
		}
		total += n
	}
	if total != sent {
		b.Fatalf("%d tells handled of %d", total, sent)
	}
}
