package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

// countGrain is the counting grain.
type countGrain struct {
	n   int
	sig *atomic.Int64
	s   *silo.Silo // for the relay's call
}

func (g *countGrain) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	m := msg.(*bmsg)
	if m.to > 0 {
		return silo.Call[int](ctx, g.s, grain.NewIntID("c", m.to-1), askMsg)
	}
	if m.work {
		spin(floodWork)
	}
	if m.count {
		g.n++
	}
	if m.signal {
		g.sig.Add(1)
	}
	if m.reply {
		return g.n, nil
	}
	return nil, nil
}

type granaryTarget struct {
	s       *silo.Silo
	sig     atomic.Int64
	ctx     context.Context
	cancel  context.CancelFunc
	cancels []context.CancelFunc
}

func mustSilo(cfg silo.Config) *silo.Silo {
	s, err := silo.New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

func newGranaryTarget() target {
	t := &granaryTarget{s: mustSilo(silo.Config{})}
	if err := silo.Register(t.s, "c", func(grain.ID) *countGrain { return &countGrain{sig: &t.sig, s: t.s} }); err != nil {
		panic(err)
	}
	if err := t.s.Start(); err != nil {
		panic(err)
	}
	// A deadline on the callers' ctx, as a service would have.
	t.ctx, t.cancel = context.WithTimeout(context.Background(), time.Hour)
	return t
}

// Tell retries while the silo pushes back with ErrOverloaded: backpressure,
// not loss (the refused attempt is counted as a dead letter by the silo).
func (t *granaryTarget) Tell(key int64, m *bmsg) error {
	id := grain.NewIntID("c", key)
	for {
		err := t.s.Tell(t.ctx, id, m)
		if err == nil || !errors.Is(err, grain.ErrOverloaded) { // no call on success
			return err
		}
		runtime.Gosched()
	}
}

func (t *granaryTarget) Ask(key int64, m *bmsg) (int, error) {
	return silo.Call[int](t.ctx, t.s, grain.NewIntID("c", key), m)
}

func (t *granaryTarget) Caller() func(int64, *bmsg) (int, error) {
	ctx, cancel := context.WithTimeout(t.ctx, time.Hour)
	t.cancels = append(t.cancels, cancel)
	return func(key int64, m *bmsg) (int, error) {
		return silo.Call[int](ctx, t.s, grain.NewIntID("c", key), m)
	}
}

func (t *granaryTarget) neighbours(n int) []int64 { return keysInPartition("c", 0, n) }

func (t *granaryTarget) Signals() int64     { return t.sig.Load() }
func (t *granaryTarget) StateSize() uintptr { return unsafe.Sizeof(countGrain{}) }
func (t *granaryTarget) Close() {
	t.s.Close()
	for _, c := range t.cancels {
		c()
	}
	t.cancel()
}

// keysInPartitions returns n int keys of kind in partition want (or, with
// want < 0, the first key of each of two different partitions).
func keysInPartition(kind string, want, n int) []int64 {
	pt, _ := queues.NewPartitioner(runtime.GOMAXPROCS(0))
	var keys []int64
	for k := int64(0); len(keys) < n; k++ {
		if pt.Partition(grain.NewIntID(kind, k)) == want {
			keys = append(keys, k)
		}
	}
	return keys
}

type hit struct{}

var theHit = &hit{}

func pingGranary(_ string, p params) (Result, error) {
	s := mustSilo(silo.Config{})
	var count atomic.Int64
	done := make(chan struct{})
	peers := map[int64]grain.ID{}
	a := grain.NewIntID("pp", keysInPartition("pp", 0, 1)[0])
	b := a
	if runtime.GOMAXPROCS(0) > 1 {
		b = grain.NewIntID("pp", keysInPartition("pp", 1, 1)[0])
	}
	ka, _ := a.IntKey()
	kb, _ := b.IntKey()
	peers[ka], peers[kb] = b, a
	err := silo.Register(s, "pp", func(id grain.ID) grain.Func {
		k, _ := id.IntKey()
		peer := peers[k]
		return func(ctx context.Context, c *grain.Context, _ any) (any, error) {
			if count.Add(1) >= int64(p.msgs) {
				close(done)
				return nil, nil
			}
			return nil, c.Silo().Tell(ctx, peer, theHit)
		}
	})
	if err != nil {
		return Result{}, err
	}
	if err := s.Start(); err != nil {
		return Result{}, err
	}
	defer s.Close()
	start := time.Now()
	if err := s.Tell(context.Background(), a, theHit); err != nil {
		return Result{}, err
	}
	if err := waitDone(p, done, int64(p.msgs), count.Load); err != nil {
		return Result{}, err
	}
	el := time.Since(start)
	return Result{OpsPerSec: float64(p.msgs) / el.Seconds()}, check(int(count.Load()), p.msgs)
}

type latMsg struct {
	sent time.Time
	idx  int
}

type blockMsg struct{ d time.Duration }

// blockedGranary: one grain's turn blocks for p.block while p.grains other
// grains of its partition receive p.msgs tells, paced over the block; it
// reports their send-to-handled delay.
func blockedGranary(_ string, p params) (Result, error) {
	s := mustSilo(silo.Config{})
	delays := make([]time.Duration, p.msgs)
	var handled atomic.Int64
	err := silo.Register(s, "lat", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
			switch m := msg.(type) {
			case *latMsg:
				delays[m.idx] = time.Since(m.sent)
				handled.Add(1)
			case blockMsg:
				time.Sleep(m.d) // the blocked turn under test
			}
			return nil, nil
		}
	})
	if err != nil {
		return Result{}, err
	}
	if err := s.Start(); err != nil {
		return Result{}, err
	}
	defer s.Close()
	ctx := context.Background()
	keys := keysInPartition("lat", 0, p.grains+1)
	ids := make([]grain.ID, len(keys))
	for i, k := range keys {
		ids[i] = grain.NewIntID("lat", k)
		if _, err := s.Ask(ctx, ids[i], 0); err != nil { // activate
			return Result{}, err
		}
	}
	if err := s.Tell(ctx, ids[0], blockMsg{p.block}); err != nil {
		return Result{}, err
	}
	return measureDelays(p, delays, &handled, func(i int) error {
		return s.Tell(ctx, ids[1+i%p.grains], &latMsg{sent: time.Now(), idx: i})
	})
}

// measureDelays sends the blocked workload's messages paced over the block,
// waits until all were handled, and reports their delays.
func measureDelays(p params, delays []time.Duration, handled *atomic.Int64, send func(i int) error) (Result, error) {
	start := time.Now()
	if err := paced(p, send); err != nil {
		return Result{}, err
	}
	if err := waitHandled(p, int64(p.msgs), handled.Load, time.Millisecond); err != nil {
		return Result{}, err
	}
	el := time.Since(start)
	p50, p99 := percentiles(delays)
	return Result{OpsPerSec: float64(p.msgs) / el.Seconds(), P50us: p50, P99us: p99}, nil
}

// paced sends p.msgs messages in 100-message batches spread evenly over
// p.block.
func paced(p params, send func(i int) error) error {
	batches := max(p.msgs/100, 1)
	gap := p.block / time.Duration(batches)
	next := time.Now()
	for i := range p.msgs {
		if i%100 == 0 {
			time.Sleep(time.Until(next))
			next = next.Add(gap)
		}
		if err := send(i); err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
	}
	return nil
}
