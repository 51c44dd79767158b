package main

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
)

// protoactor-go with library defaults, as a user would pick it instead: one
// actor per grain, spawned on the grain's first message (plain actors; its
// virtual grains need the cluster package and a cluster provider).

type paCounter struct {
	n   int
	sig *atomic.Int64
	pid func(key int64) *actor.PID // for the relay's call
}

func (a *paCounter) Receive(c actor.Context) {
	if m, ok := c.Message().(*bmsg); ok {
		if m.to > 0 {
			// The actor waits for the answer, as a grain's turn does:
			// protoactor's RequestFuture from inside a Receive.
			v, err := c.RequestFuture(a.pid(m.to-1), askMsg, 30*time.Second).Result()
			if err != nil {
				c.Respond(err)
				return
			}
			c.Respond(v)
			return
		}
		if m.work {
			spin(floodWork)
		}
		if m.count {
			a.n++
		}
		if m.signal {
			a.sig.Add(1)
		}
		if m.reply {
			c.Respond(a.n)
		}
	}
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

type protoTarget struct {
	sys   *actor.ActorSystem
	props *actor.Props
	sig   atomic.Int64
	mu    sync.Mutex
	pids  []atomic.Pointer[actor.PID]
}

func newProtoTarget() target {
	t := &protoTarget{sys: quietSystem(), pids: make([]atomic.Pointer[actor.PID], 1<<21)}
	t.props = actor.PropsFromProducer(func() actor.Actor { return &paCounter{sig: &t.sig, pid: t.pid} })
	return t
}

// pid returns the key's actor, spawning it on first use (the activation).
func (t *protoTarget) pid(key int64) *actor.PID {
	if p := t.pids[key].Load(); p != nil {
		return p
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pids[key].Load(); p != nil {
		return p
	}
	p := t.sys.Root.Spawn(t.props)
	t.pids[key].Store(p)
	return p
}

func (t *protoTarget) Tell(key int64, m *bmsg) error {
	t.sys.Root.Send(t.pid(key), m)
	return nil
}

func (t *protoTarget) Ask(key int64, m *bmsg) (int, error) {
	v, err := t.sys.Root.RequestFuture(t.pid(key), m, 30*time.Second).Result()
	if err != nil {
		return 0, err
	}
	if err, ok := v.(error); ok { // a relay's call that failed
		return 0, err
	}
	return v.(int), nil
}

func (t *protoTarget) Caller() func(int64, *bmsg) (int, error) { return t.Ask }

func (t *protoTarget) Signals() int64     { return t.sig.Load() }
func (t *protoTarget) StateSize() uintptr { return unsafe.Sizeof(paCounter{}) }
func (t *protoTarget) Close()             { t.sys.Shutdown() }

type paPing struct {
	peer  *actor.PID
	count *atomic.Int64
	n     int64
	done  chan struct{}
}

func (a *paPing) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.PID:
		a.peer = m
	case *hit:
		if a.count.Add(1) >= a.n {
			close(a.done)
			return
		}
		c.Send(a.peer, m)
	}
}

func pingProto(_ string, p params) (Result, error) {
	sys := quietSystem()
	defer sys.Shutdown()
	var count atomic.Int64
	done := make(chan struct{})
	props := actor.PropsFromProducer(func() actor.Actor { return &paPing{count: &count, n: int64(p.msgs), done: done} })
	a, b := sys.Root.Spawn(props), sys.Root.Spawn(props)
	sys.Root.Send(a, b)
	sys.Root.Send(b, a)
	start := time.Now()
	sys.Root.Send(a, theHit)
	if err := waitDone(p, done, int64(p.msgs), count.Load); err != nil {
		return Result{}, err
	}
	el := time.Since(start)
	return Result{OpsPerSec: float64(p.msgs) / el.Seconds()}, check(int(count.Load()), p.msgs)
}
