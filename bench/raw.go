package main

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// raw is the floor: the same design with no runtime features at all. P
// hash-partitioned queues (a mutex-guarded slice the consumer swaps out
// whole), one goroutine per partition, a partition-local map from key to
// state, the handler called inline.

type rawState struct{ n int }

type rawEnv struct {
	key   int64
	m     *bmsg
	reply chan int
	lat   *latMsg
	block time.Duration
	hit   bool
}

type rawPart struct {
	mu     sync.Mutex
	q      []rawEnv
	wake   chan struct{}
	closed bool
	states map[int64]*rawState
}

type rawSystem struct {
	parts  []*rawPart
	sig    atomic.Int64
	handle func(sys *rawSystem, st *rawState, e *rawEnv)
	wg     sync.WaitGroup
}

func newRawSystem(handle func(sys *rawSystem, st *rawState, e *rawEnv)) *rawSystem {
	s := &rawSystem{handle: handle, parts: make([]*rawPart, runtime.GOMAXPROCS(0))}
	for i := range s.parts {
		p := &rawPart{wake: make(chan struct{}, 1), states: map[int64]*rawState{}}
		s.parts[i] = p
		s.wg.Go(func() { s.loop(p) })
	}
	return s
}

func (s *rawSystem) part(key int64) *rawPart {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(key))
	return s.parts[xxhash.Sum64(b[:])%uint64(len(s.parts))]
}

func (s *rawSystem) send(e rawEnv) {
	p := s.part(e.key)
	p.mu.Lock()
	signal := len(p.q) == 0
	p.q = append(p.q, e)
	p.mu.Unlock()
	if signal {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (s *rawSystem) loop(p *rawPart) {
	var spare []rawEnv
	yielded := false
	for {
		p.mu.Lock()
		batch, closed := p.q, p.closed
		p.q = spare[:0]
		p.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			spare = batch
			// The design's own scheduling choice, as Granary makes it: out
			// of work after a busy round, let the goroutines just answered
			// run before parking, so their next messages come as one batch.
			if !yielded {
				yielded = true
				runtime.Gosched()
				continue
			}
			<-p.wake
			continue
		}
		yielded = false
		for i := range batch {
			e := &batch[i]
			st := p.states[e.key]
			if st == nil {
				st = &rawState{}
				p.states[e.key] = st
			}
			s.handle(s, st, e)
		}
		clear(batch)
		spare = batch
	}
}

func (s *rawSystem) close() {
	for _, p := range s.parts {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	s.wg.Wait()
}

func countHandler(sys *rawSystem, st *rawState, e *rawEnv) {
	if e.m.work {
		spin(floodWork)
	}
	if e.m.count {
		st.n++
	}
	if e.m.signal {
		sys.sig.Add(1)
	}
	if e.reply != nil {
		e.reply <- st.n
	}
}

type rawTarget struct{ sys *rawSystem }

func newRawTarget() target { return &rawTarget{sys: newRawSystem(countHandler)} }

func (t *rawTarget) Tell(key int64, m *bmsg) error {
	t.sys.send(rawEnv{key: key, m: m})
	return nil
}

func (t *rawTarget) Ask(key int64, m *bmsg) (int, error) {
	ch := make(chan int, 1)
	t.sys.send(rawEnv{key: key, m: m, reply: ch})
	return <-ch, nil
}

func (t *rawTarget) Caller() func(int64, *bmsg) (int, error) { return t.Ask }

// neighbours returns n keys of one partition.
func (t *rawTarget) neighbours(n int) []int64 {
	var keys []int64
	for k := int64(0); len(keys) < n; k++ {
		if t.sys.part(k) == t.sys.part(0) {
			keys = append(keys, k)
		}
	}
	return keys
}

func (t *rawTarget) Signals() int64     { return t.sys.sig.Load() }
func (t *rawTarget) StateSize() uintptr { return unsafe.Sizeof(rawState{}) }
func (t *rawTarget) Close()             { t.sys.close() }

func pingRaw(_ string, p params) (Result, error) {
	var count atomic.Int64
	done := make(chan struct{})
	a, b := int64(0), int64(1)
	sys := newRawSystem(func(sys *rawSystem, st *rawState, e *rawEnv) {
		if count.Add(1) >= int64(p.msgs) {
			close(done)
			return
		}
		peer := a
		if e.key == a {
			peer = b
		}
		sys.send(rawEnv{key: peer, hit: true})
	})
	defer sys.close()
	for sys.part(b) == sys.part(a) && len(sys.parts) > 1 {
		b++
	}
	start := time.Now()
	sys.send(rawEnv{key: a, hit: true})
	if err := waitDone(p, done, int64(p.msgs), count.Load); err != nil {
		return Result{}, err
	}
	el := time.Since(start)
	return Result{OpsPerSec: float64(p.msgs) / el.Seconds()}, check(int(count.Load()), p.msgs)
}

func blockedRaw(_ string, p params) (Result, error) {
	delays := make([]time.Duration, p.msgs)
	var handled atomic.Int64
	sys := newRawSystem(func(sys *rawSystem, st *rawState, e *rawEnv) {
		switch {
		case e.block > 0:
			time.Sleep(e.block) // no handoff: the whole partition waits
		case e.lat != nil:
			delays[e.lat.idx] = time.Since(e.lat.sent)
			handled.Add(1)
		}
	})
	defer sys.close()
	// The blocked key and p.grains keys of the same partition.
	keys := []int64{0}
	for k := int64(1); len(keys) < p.grains+1; k++ {
		if sys.part(k) == sys.part(0) {
			keys = append(keys, k)
		}
	}
	sys.send(rawEnv{key: keys[0], block: p.block})
	return measureDelays(p, delays, &handled, func(i int) error {
		sys.send(rawEnv{key: keys[1+i%p.grains], lat: &latMsg{sent: time.Now(), idx: i}})
		return nil
	})
}
