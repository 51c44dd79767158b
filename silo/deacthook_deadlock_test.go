package silo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// leaver is a grain whose OnDeactivate calls another grain (a player
// leaving its room, say) and reports the call's outcome; with detach, it
// makes the call under a ctx that outlives the hook's deadline (a hook
// that ignores it). Its "hold" turns tell in and wait for gate.
type leaver struct {
	s      *silo.Silo
	to     grain.ID
	also   grain.ID // if set, the hook calls it too, at once, and waits for both
	detach bool
	out    chan<- error
	in     chan<- struct{}
	gate   <-chan struct{}
}

func (l *leaver) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "hold" {
		l.in <- struct{}{}
		<-l.gate
	}
	return "ok", nil
}

func (l *leaver) OnDeactivate(ctx context.Context, _ *grain.Context) error {
	if l.detach {
		ctx = context.WithoutCancel(ctx)
	}
	also := make(chan error, 1)
	if !l.also.IsZero() {
		go func() { _, err := silo.Call[string](ctx, l.s, l.also, "ping"); also <- err }()
	} else {
		also <- nil
	}
	_, err := silo.Call[string](ctx, l.s, l.to, "ping")
	err = errors.Join(err, <-also)
	l.out <- err
	return err
}

// kindsOfEveryInterleaving returns the options of a kind that lets
// nothing in while a turn waits, one that lets everything in, and one
// whose WithMayInterleave predicate takes every message, by name.
func kindsOfEveryInterleaving() map[string][]silo.KindOption {
	return map[string][]silo.KindOption{
		"plain":          nil,
		"reentrant":      {silo.WithReentrant()},
		"may interleave": {silo.WithMayInterleave(func(any) bool { return true })},
	}
}

// leaveWhileTheRoomWaits activates a, holds the room's turn (which, let
// go, asks a), and deactivates a, whose hook calls the room behind that
// turn. It returns a ctx for the test and the outcome of the room's turn.
func leaveWhileTheRoomWaits(t *testing.T, s *silo.Silo, a, room grain.ID, in <-chan struct{}) (context.Context, <-chan error) {
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	t.Cleanup(cancel)
	_, err := s.Ask(ctx, a, "hi")
	require.NoError(t, err)
	fromRoom := askAsync(ctx, s, room, "go")
	<-in
	require.NoError(t, s.Deactivate(ctx, a))
	waitBacklog(t, s, 1) // the hook's call waits behind the room's turn
	return ctx, fromRoom
}

// A cycle through an OnDeactivate: a's hook calls the room, whose turn —
// on another chain — asks a, which waits for its deactivation to end,
// whatever its kind (a reentrant grain, or one whose WithMayInterleave
// predicate takes the ask, lets nothing in on its way out). The room's
// ask fails at once with ErrCallCycle; the room's turn ends, and the
// hook's call is answered. (A hook's calls were no edges: both waited
// until the hook's ctx ended at DeactivationTimeout, 10 s by default.)
func TestACycleThroughOnDeactivateFailsFast(t *testing.T) {
	for name, opts := range kindsOfEveryInterleaving() {
		t.Run(name, func(t *testing.T) {
			a, room := grain.NewID("leaver", "a"), grain.NewID("room", "r")
			in, gate, hookOut := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
			s := newSilo(t, silo.Config{DeactivationTimeout: time.Minute}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "leaver", func(grain.ID) *leaver { return &leaver{s: s, to: room, out: hookOut} }, opts...))
				require.NoError(t, silo.Register(s, "room", callsBackKind(s, in, gate, a, "hi")))
			})
			_, fromRoom := leaveWhileTheRoomWaits(t, s, a, room, in)
			close(gate) // the room asks a, which waits for its hook
			requireCycle(t, <-fromRoom, room, a, room)
			require.NoError(t, <-hookOut, "the hook's call answered once the room's turn had ended")
			assert.Equal(t, uint64(1), s.Stats().DeadLetters[grain.ReasonDeadlock])
		})
	}
}

// An OnDeactivate given up on is no longer a turn of its grain: its call
// still out (made under a ctx that ignores the hook's deadline) is no edge
// of the grain's next activation, whose turn waits on nothing. The room's
// turn, on the chain of the hook's call, asks the next activation of a
// while a turn of it holds — and is answered once that turn ends, not
// failed as a cycle through the hook.
func TestAnOnDeactivateGivenUpOnIsNoEdgeOfTheNextActivation(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a, room := grain.NewID("leaver", "a"), grain.NewID("room", "r")
	in, gate, hookOut := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	aIn, aGate := make(chan struct{}, 1), make(chan struct{})
	s := newSilo(t, silo.Config{Clock: clk, DeactivationTimeout: time.Second}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "leaver", func(grain.ID) *leaver {
			return &leaver{s: s, to: room, detach: true, out: hookOut, in: aIn, gate: aGate}
		}))
		require.NoError(t, silo.Register(s, "room", callsBackKind(s, in, gate, a, "hi")))
	})
	ctx, fromRoom := leaveWhileTheRoomWaits(t, s, a, room, in)
	require.Eventually(t, func() bool { return s.Stats().Handoffs > 0 }, 5*time.Second, time.Millisecond)
	clk.Advance(time.Second + silo.DefaultHandoffThreshold) // the hook is given up on
	fromA := askAsync(ctx, s, a, "hold")                    // a's next activation
	<-aIn
	close(gate)          // the room asks a, behind its hold turn: walked
	waitBacklog(t, s, 2) // and the hook's call still behind the room's turn
	close(aGate)
	require.NoError(t, <-fromA)
	require.NoError(t, <-fromRoom, "the room's call answered once a's turn had ended")
	require.NoError(t, <-hookOut, "the given-up hook's call answered once the room's turn had ended")
	assert.Zero(t, s.Stats().DeadLetters[grain.ReasonDeadlock])
}

// An OnDeactivate that calls its own grain fails at once with
// ErrCallCycle, whatever the grain's kind: on its way out, the grain lets
// nothing in, not even a call back on the hook's own chain, and its next
// activation waits for the hook. (A reentrant kind's call, or one its
// WithMayInterleave predicate takes, was taken for a call back into a
// waiting turn, let in: it waited until the hook's ctx ended at
// DeactivationTimeout.)
func TestAnOnDeactivateCallingItsOwnGrainFailsFast(t *testing.T) {
	for name, opts := range kindsOfEveryInterleaving() {
		t.Run(name, func(t *testing.T) {
			a := grain.NewID("leaver", "a")
			hookOut := make(chan error, 1)
			s := newSilo(t, silo.Config{DeactivationTimeout: time.Minute}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "leaver", func(grain.ID) *leaver { return &leaver{s: s, to: a, out: hookOut} }, opts...))
			})
			ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			_, err := s.Ask(ctx, a, "hi")
			require.NoError(t, err)
			require.NoError(t, s.Deactivate(ctx, a))
			requireCycle(t, <-hookOut, a, a)
		})
	}
}

// An OnDeactivate that fans out lets nothing in either: r's hook (a
// reentrant kind's) calls p and q at once and waits for both, each of
// whose turns, on chains of their own, calls r. The call that closes the
// second cycle, q's, fails at once; q's turn ends and answers the hook,
// whose call to p, left, then closes the other and fails too (walked
// again as q's call ended); p's call reaches r's next activation. (A
// reentrant grain with several hook calls out was taken for one that lets
// calls in: every call waited, the hook's until DeactivationTimeout.)
func TestAnOnDeactivateThatFansOutLetsNothingIn(t *testing.T) {
	r, p, q := grain.NewID("leaver", "r"), grain.NewID("p", "p"), grain.NewID("q", "q")
	pIn, pGate, qIn, qGate := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1), make(chan struct{})
	hookOut := make(chan error, 1)
	s := newSilo(t, silo.Config{DeactivationTimeout: time.Minute}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "leaver", func(grain.ID) *leaver {
			return &leaver{s: s, to: p, also: q, out: hookOut}
		}, silo.WithReentrant()))
		require.NoError(t, silo.Register(s, "p", callsBackKind(s, pIn, pGate, r, "hi")))
		require.NoError(t, silo.Register(s, "q", callsBackKind(s, qIn, qGate, r, "hi")))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	_, err := s.Ask(ctx, r, "hi")
	require.NoError(t, err)
	fromP := askAsync(ctx, s, p, "go")
	<-pIn
	fromQ := askAsync(ctx, s, q, "go")
	<-qIn
	require.NoError(t, s.Deactivate(ctx, r))
	waitBacklog(t, s, 2) // the hook's calls wait behind p's turn and q's
	close(pGate)         // p calls r: q may answer r's hook yet
	waitBacklog(t, s, 3)
	close(qGate) // q calls r: both cycles closed
	requireCycle(t, <-fromQ, q, r, q)
	require.ErrorIs(t, <-hookOut, grain.ErrCallCycle, "the hook's call to p, left, closing the other cycle")
	require.NoError(t, <-fromP, "p's call answered by r's next activation")
	assert.Equal(t, uint64(2), s.Stats().DeadLetters[grain.ReasonDeadlock])
}
