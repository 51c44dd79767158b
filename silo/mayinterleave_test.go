package silo_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// status is the message the svc kind lets in while one of its turns waits.
type status struct{}

func isStatus(msg any) bool { _, ok := msg.(status); return ok }

// svc is a grain whose kind interleaves status queries (WithMayInterleave).
// "work" calls the gated grain and waits there; "io" waits for the env's
// gate in silo.Await; "hold" first waits for
// its own gate, holding the turn, then does the same; "call:MSG" calls the
// relay grain r with MSG, which calls back into svc with it.
type svc struct {
	e *svcEnv
}

func (g *svc) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if isStatus(msg) {
		g.e.note("status")
		return "status", nil
	}
	m := msg.(string)
	g.e.note(m)
	switch {
	case m == "hold":
		<-g.e.hold
		fallthrough
	case m == "work":
		return silo.Call[string](ctx, c.Silo(), grain.NewID("gated", "g"), "x")
	case m == "io": // a wait that is no grain call
		g.e.in <- struct{}{}
		return "ok", silo.Await(ctx, func() error { <-g.e.gate; return nil })
	case m == "tick":
		return "ok", c.StartTimer("t", time.Minute, 0, status{})
	case strings.HasPrefix(m, "call:"):
		return silo.Call[string](ctx, c.Silo(), grain.NewID("relay", "r"), strings.TrimPrefix(m, "call:"))
	}
	return "ok", nil
}

// svcRelay calls svc back with the message it got ("pause:MSG" first waits
// for the env's gate, holding its turn).
type svcRelay struct{ e *svcEnv }

func (r svcRelay) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	m := msg.(string)
	if rest, ok := strings.CutPrefix(m, "pause:"); ok {
		r.e.in <- struct{}{}
		<-r.e.gate
		m = rest
	}
	var back any = m
	if m == "status" {
		back = status{}
	}
	return silo.Call[string](ctx, c.Silo(), grain.NewID("svc", "s"), back)
}

type svcEnv struct {
	s    *silo.Silo
	ctx  context.Context
	id   grain.ID
	in   chan struct{} // the gated grain got a call
	gate chan struct{} // lets the gated grain answer
	hold chan struct{} // lets "hold" go on to its call
	mu   sync.Mutex
	log  []string
}

func (e *svcEnv) note(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *svcEnv) logged() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

func newSvc(t *testing.T, cfg silo.Config, pred func(any) bool) *svcEnv {
	e := &svcEnv{ctx: ctxT(t), id: grain.NewID("svc", "s"), in: make(chan struct{}, 4),
		gate: make(chan struct{}), hold: make(chan struct{})}
	cfg.Partitions = 1 // one queue: what is sent first reaches its grain first
	e.s = newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "svc", func(grain.ID) *svc { return &svc{e: e} }, silo.WithMayInterleave(pred)))
		require.NoError(t, silo.Register(s, "gated", func(grain.ID) gated { return gated{in: e.in, gate: e.gate} }))
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) svcRelay { return svcRelay{e: e} }))
	})
	return e
}

// callAsync calls svc with msg on a goroutine of its own.
func (e *svcEnv) callAsync(msg any) <-chan error {
	done := make(chan error, 1)
	go func() { _, err := silo.Call[string](e.ctx, e.s, e.id, msg); done <- err }()
	return done
}

// While a turn waits in a call, a message the predicate takes runs at once,
// ahead of one it does not take that came first; that one waits for the
// turn to end, as in any non-reentrant grain.
func TestMayInterleaveLetsInWhatItsPredicateTakes(t *testing.T) {
	e := newSvc(t, silo.Config{}, isStatus)
	worked := e.callAsync("work")
	<-e.in                                             // work waits in its call
	require.NoError(t, e.s.Tell(e.ctx, e.id, "write")) // to the mailbox
	v, err := silo.Call[string](e.ctx, e.s, e.id, status{})
	require.NoError(t, err)
	assert.Equal(t, "status", v)
	assert.Equal(t, []string{"work", "status"}, e.logged(), "the write waits for work's turn")

	close(e.gate)
	require.NoError(t, <-worked)
	_, err = silo.Call[string](e.ctx, e.s, e.id, "last")
	require.NoError(t, err)
	assert.Equal(t, []string{"work", "status", "write", "last"}, e.logged())
}

// Messages that reached the grain while its turn ran (before it called
// out) wait in the mailbox; once the turn waits, those the predicate takes
// go in, overtaking the others, which keep their order.
func TestMayInterleaveLetsTheMailboxInOnceATurnWaits(t *testing.T) {
	e := newSvc(t, silo.Config{}, isStatus)
	worked := e.callAsync("hold")
	require.Eventually(t, func() bool { return len(e.logged()) == 1 }, 10*time.Second, time.Millisecond, "hold runs")
	require.NoError(t, e.s.Tell(e.ctx, e.id, "write1"))
	first := e.callAsync(status{})
	require.NoError(t, e.s.Tell(e.ctx, e.id, "write2"))
	second := e.callAsync(status{})
	waitBacklog(t, e.s, 4) // the watchdog handed the partition off: all four reached the mailbox
	close(e.hold)          // hold calls out: the statuses go in
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	assert.Equal(t, []string{"hold", "status", "status"}, e.logged())

	close(e.gate)
	require.NoError(t, <-worked)
	_, err := silo.Call[string](e.ctx, e.s, e.id, "last")
	require.NoError(t, err)
	assert.Equal(t, []string{"hold", "status", "status", "write1", "write2", "last"}, e.logged())
}

// A call back into a waiting turn's chain is allowed when the predicate
// takes its message, and is a call cycle when it does not.
func TestMayInterleaveDecidesACallBackOnTheChain(t *testing.T) {
	e := newSvc(t, silo.Config{}, isStatus)
	v, err := silo.Call[string](e.ctx, e.s, e.id, "call:status")
	require.NoError(t, err)
	assert.Equal(t, "status", v)

	_, err = silo.Call[string](e.ctx, e.s, e.id, "call:write")
	require.ErrorIs(t, err, grain.ErrCallCycle)
	var ce *grain.CallCycleError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []grain.ID{e.id, grain.NewID("relay", "r"), e.id}, ce.Chain)
}

// Across chains too: svc's turn waits on the relay while the relay's turn,
// on another chain, calls svc. A status goes in; a write would wait for
// ever, so the deadlock check fails it at once (and then the relay's call
// back into svc, on svc's chain, is a call cycle too).
func TestMayInterleaveAndDeadlocksAcrossChains(t *testing.T) {
	for _, back := range []string{"status", "write"} {
		t.Run(back, func(t *testing.T) {
			e := newSvc(t, silo.Config{}, isStatus)
			relayTurn := make(chan error, 1)
			go func() { // chain 1: the relay holds its turn, then calls svc
				_, err := silo.Call[string](e.ctx, e.s, grain.NewID("relay", "r"), "pause:"+back)
				relayTurn <- err
			}()
			<-e.in
			svcTurn := e.callAsync("call:" + back) // chain 2: svc calls the busy relay
			waitBacklog(t, e.s, 1)
			close(e.gate)
			errs := []error{<-relayTurn, <-svcTurn}
			if back == "status" {
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
				return
			}
			for _, err := range errs {
				require.ErrorIs(t, err, grain.ErrCallCycle)
			}
			var dl *grain.DeadLetterError
			require.ErrorAs(t, errs[0], &dl, "the ask that closed the cycle")
			assert.Equal(t, grain.ReasonDeadlock, dl.Reason)
		})
	}
}

// A timer's tick the predicate takes runs while a turn waits, like a
// message.
func TestMayInterleaveLetsATimersTickIn(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newSvc(t, silo.Config{Clock: clk}, isStatus)
	_, err := silo.Call[string](e.ctx, e.s, e.id, "tick") // a status tick, due in a minute
	require.NoError(t, err)
	worked := e.callAsync("work")
	<-e.in
	clk.Advance(time.Minute)
	require.Eventually(t, func() bool { return len(e.logged()) == 3 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"tick", "work", "status"}, e.logged())
	close(e.gate)
	require.NoError(t, <-worked)
}

// A predicate that panics takes nothing: the message waits for the turn,
// the panic is logged, and no silo goroutine is harmed.
func TestMayInterleavePredicateThatPanics(t *testing.T) {
	var buf syncBuffer
	e := newSvc(t, silo.Config{Logger: newTextLogger(&buf)}, func(msg any) bool {
		if isStatus(msg) {
			panic("bad predicate")
		}
		return false
	})
	worked := e.callAsync("work")
	<-e.in
	st := e.callAsync(status{})
	waitBacklog(t, e.s, 1) // not let in: it waits in the mailbox
	close(e.gate)
	require.NoError(t, <-worked)
	require.NoError(t, <-st)
	assert.Equal(t, []string{"work", "status"}, e.logged())
	e.s.WaitLogged()
	assert.Contains(t, buf.String(), "bad predicate")
}

func TestMayInterleaveRefusesANilPredicate(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()
	err = silo.Register(s, "svc", func(grain.ID) *svc { return &svc{} }, silo.WithMayInterleave(nil))
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.False(t, errors.Is(err, grain.ErrAlreadyRegistered))
}

// Await makes a wait that is no grain call an await point: what the kind
// interleaves goes in while it runs, the rest waits for the turn.
func TestAwaitLetsInWhatTheKindInterleaves(t *testing.T) {
	e := newSvc(t, silo.Config{}, isStatus)
	worked := e.callAsync("io")
	<-e.in // in Await
	require.NoError(t, e.s.Tell(e.ctx, e.id, "write"))
	v, err := silo.Call[string](e.ctx, e.s, e.id, status{})
	require.NoError(t, err)
	assert.Equal(t, "status", v)
	close(e.gate)
	require.NoError(t, <-worked)
	_, err = silo.Call[string](e.ctx, e.s, e.id, "last")
	require.NoError(t, err)
	assert.Equal(t, []string{"io", "status", "write", "last"}, e.logged())
}

// In a kind that interleaves nothing, Await lets no message of the grain
// in, but the partition serves its other grains at once: with a handoff
// threshold of an hour, a call to another grain of the one partition
// would otherwise wait that long.
func TestAwaitLetsThePartitionGoAtOnce(t *testing.T) {
	ctx := ctxT(t)
	in, gate := make(chan struct{}), make(chan struct{})
	s := newSilo(t, silo.Config{Partitions: 1, HandoffThreshold: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "io", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "wait" {
					close(in)
					return "waited", silo.Await(ctx, func() error { <-gate; return nil })
				}
				return "ok", nil
			}
		}))
	})
	waited := make(chan error, 1)
	go func() { _, err := silo.Call[string](ctx, s, grain.NewID("io", "a"), "wait"); waited <- err }()
	<-in
	v, err := silo.Call[string](ctx, s, grain.NewID("io", "b"), "other")
	require.NoError(t, err)
	assert.Equal(t, "ok", v)
	close(gate)
	require.NoError(t, <-waited)
}

func TestAwaitOutsideATurnAndBadInput(t *testing.T) {
	boom := errors.New("boom")
	require.ErrorIs(t, silo.Await(context.Background(), func() error { return boom }), boom)
	require.ErrorIs(t, silo.Await(context.Background(), nil), silo.ErrNilFunc)
	//lint:ignore SA1012 a nil ctx is what is tested
	require.ErrorIs(t, silo.Await(nil, func() error { return nil }), grain.ErrNilContext) //nolint:staticcheck
}

// A message the predicate takes keeps its sender: none from outside, the
// calling grain from a turn (its envelope metadata is a marked copy of
// the sender's).
func TestMayInterleaveKeepsTheSender(t *testing.T) {
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "who", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				if msg == "relay" {
					return silo.Call[string](ctx, c.Silo(), grain.NewID("who", "b"), status{})
				}
				if from, ok := c.Sender(); ok {
					return from.String(), nil
				}
				return "outside", nil
			}
		}, silo.WithMayInterleave(isStatus)))
	})
	ctx := ctxT(t)
	v, err := silo.Call[string](ctx, s, grain.NewID("who", "b"), status{})
	require.NoError(t, err)
	assert.Equal(t, "outside", v)
	v, err = silo.Call[string](ctx, s, grain.NewID("who", "a"), "relay")
	require.NoError(t, err)
	assert.Equal(t, "who/a", v)
}

// A goroutine that outlives its turn and calls Await with the turn's ctx —
// an ask's, or an interleaving tell's — is in no turn: Await just runs wait,
// and the grain, whose turn is over, is left as it is (its next turns run).
func TestAwaitWithTheCtxOfATurnThatIsOverJustRunsWait(t *testing.T) {
	kept := make(chan context.Context, 1)
	keep := func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
		if msg == "keep" {
			kept <- ctx
		}
		return "ok", nil
	}
	// No handoff but those asked for: a turn slowed by a busy machine must
	// not count as one.
	s := newSilo(t, silo.Config{HandoffThreshold: time.Hour}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "plain", func(grain.ID) grain.Func { return keep }))
		require.NoError(t, silo.Register(s, "reentrant", func(grain.ID) grain.Func { return keep }, silo.WithReentrant()))
	})
	ctx := ctxT(t)
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		id   grain.ID
		ask  bool
	}{
		{"an ask's", grain.NewID("plain", "a"), true},
		{"an interleaving tell's", grain.NewID("reentrant", "a"), false},
	} {
		if c.ask {
			_, err := s.Ask(ctx, c.id, "keep")
			require.NoError(t, err)
		} else {
			require.NoError(t, s.Tell(ctx, c.id, "keep"))
		}
		turn := <-kept
		_, err := s.Ask(ctx, c.id, "after") // the kept turn is over once this is answered
		require.NoError(t, err)
		handoffs := s.Stats().Handoffs
		ran := false
		err = silo.Await(turn, func() error { ran = true; return boom })
		require.ErrorIs(t, err, boom, c.name)
		assert.True(t, ran, c.name)
		v, err := silo.Call[string](ctx, s, c.id, "next")
		require.NoError(t, err, c.name)
		assert.Equal(t, "ok", v, c.name)
		assert.Equal(t, handoffs, s.Stats().Handoffs, "%s: no partition was let go for it", c.name)
	}
}
