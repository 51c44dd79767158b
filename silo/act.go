package silo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/idle"
	"github.com/granary-go/granary/queues"
)

// act is the silo's record of one activation: 128 bytes on 64-bit
// platforms, two cache lines, because a silo may hold millions and a
// delivery touches the record of every message's grain. Fields marked
// "owner" belong to the partition's owner goroutine. What few grains use (timers, turn requests, interleaving) lives
// in an extra record allocated on first use.
type act struct {
	activation.Activation // owner
	k                     *kind
	g                     grain.Grain          // written by the activate turn, then read-only until a restart
	idle                  idle.Entry[struct{}] // its act is found from its address (actOf)
	x                     atomic.Pointer[actExtra]
	// the metadata naming it as a message's sender, made at its first
	// send from a turn (senderMeta)
	sender atomic.Pointer[queues.Meta]
	// Owner: turns in flight are Activation.Turns, and these flags live in
	// Activation.Marks, in what would otherwise be padding.
}

// The owner's flags, in Activation.Marks.
const (
	markReady     uint8 = 1 << iota // listed in the partition's ready queue
	markStopping                    // stopped by supervision; refuses messages
	markOverfull                    // listed in the partition's overloaded set
	markDeactWant                   // deactivate once no turn runs

	// Bits 4 to 6: why it is to deactivate (a grain.DeactivationReason),
	// kept from the first ask until OnDeactivate begins.
	reasonShift       = 4
	reasonMask  uint8 = 7 << reasonShift

	// A stateless worker's activation, whose messages and turns its
	// partition counts for senders (stateless.go). Set at activation, for
	// good: the owner tests this bit of a record it reads anyway, not the
	// kind's, on every message.
	markWorker uint8 = 1 << 7
)

func (a *act) setMark(m uint8, on bool) {
	if on {
		a.Marks |= m
	} else {
		a.Marks &^= m
	}
}

func (a *act) isReady() bool           { return a.Marks&markReady != 0 }
func (a *act) setInReady(on bool)      { a.setMark(markReady, on) }
func (a *act) isStopping() bool        { return a.Marks&markStopping != 0 }
func (a *act) setStopping(on bool)     { a.setMark(markStopping, on) }
func (a *act) isOverfull() bool        { return a.Marks&markOverfull != 0 }
func (a *act) setOverfullMark(on bool) { a.setMark(markOverfull, on) }
func (a *act) wantsDeactivate() bool   { return a.Marks&markDeactWant != 0 }
func (a *act) setDeactWant(on bool)    { a.setMark(markDeactWant, on) }
func (a *act) isWorker() bool          { return a.Marks&markWorker != 0 }

// wantDeactivate marks a to deactivate once no turn runs, for reason r
// unless it was marked already: the first cause is the one reported — but
// for a grain taken for idleness (or shed as the most idle), which a
// message would call off (idleReason), a request that comes before its
// deactivation begins takes its place: a Deactivate, a Stop or a shutdown
// is not called off, and OnDeactivate learns of it.
func (a *act) wantDeactivate(r grain.DeactivationReason) {
	if !a.wantsDeactivate() || idleReason(a.deactReason()) && requestedReason(r) {
		a.Marks = a.Marks&^reasonMask | uint8(r)<<reasonShift
	}
	a.setMark(markDeactWant, true)
}

// deactReason is the reason a was marked to deactivate for.
func (a *act) deactReason() grain.DeactivationReason {
	return grain.DeactivationReason(a.Marks & reasonMask >> reasonShift)
}

// actExtra is the part of an activation only some grains need.
type actExtra struct {
	// turn-side requests, written by turns, applied by the owner when the
	// turn has finished
	mu         sync.Mutex // interleaved turns may write concurrently
	deactivate bool
	refuse     timerRefusal // why a timer started now would never fire, if it would not
	unkept     bool         // DelayDeactivation(d <= 0): the keep-alive was cancelled
	// The small fields below sit in the word mu leaves: a grain with a
	// timer needs this record, and pays for it whole (192 bytes, in the
	// allocator's classes; TestActExtraFits192Bytes).

	// why OnDeactivate runs: written by the owner before its turn begins,
	// read by the turn (act.DeactivationReason)
	deactReason grain.DeactivationReason
	// owner: a failure's directive (Restart or Stop), plus one, that waits
	// for the grain's last turn to end, because a turn failed while another
	// waited in a call; 0: none (one byte, not two: the holding mark below
	// needs the other)
	deferred uint8
	// owner: a deactivation asked for while the grain was busy and could be
	// waited on by what interleaves (DeactivateOnIdle from a turn that ended
	// while another waited in a call; Silo.Deactivate of a busy reentrant
	// grain); applied when the grain's last turn ends
	deactWhenIdle bool
	// owner: 0, or the steps of its flood were last measured slow
	// (stepoff.go: slowSteps) — 1, plus its steps timed quick in a row
	// since (timedStep)
	slowSteps uint8
	// owner: a turn that holds the grain's other messages is under way
	// (holding.go; a oneHolds kind's)
	holding bool

	keepUntil time.Duration
	timerOps  []timerOp

	timers     []*grainTimer          // owner (timers.go)
	timerIndex map[string]*grainTimer // owner: timers by name, once there are many
	restarts   activation.Restarts    // owner: for supervision's restart limit

	// OnDeactivate's bounds, made as it begins (beginDeactivate): a record
	// of its own, so that a grain that needs this one for something else —
	// a timer — does not carry them all its life
	deact *deactHook

	stopAt stopPoint // owner: where an explicit Stop stands among the messages

	// For interleaving (reentrant kinds, WithMayInterleave, call-chain
	// reentrancy): the turn token, and how many turns wait in a call (or
	// in Await) holding none.
	token   fifoToken
	waiting atomic.Int32
	// activating: OnActivate runs. An interleaving kind's messages do not
	// interleave with it — the grain's state may not be loaded yet — but
	// calls back on its call chain still do, or they would deadlock.
	activating atomic.Bool
	// held: the grain is being stopped, and lets nothing in from now on
	// but calls back on its waiting turns' chains. Set by the owner, read
	// by its turns' calls, both under its partition's wait shard lock
	// (waitShard.hold, start): such a call is an edge a deadlock walk
	// reads, as an OnActivate's is (waitCall.hook).
	held   atomic.Bool
	callMu sync.Mutex // guards the turns' holdsToken and calls (see leaveToken)
	// owner: how many messages in the mailbox its kind's WithMayInterleave
	// predicate let in, so that flushMailbox looks through it only when one
	// may go in; and how many asks from grains' turns in it may go in — a
	// reentrant kind's, or those its predicate let in — which go in past
	// the bound on interleaved turns (turnsAsk)
	mayIn, turnAsks int32
}

// deactHook is what bounds a running OnDeactivate.
type deactHook struct {
	timer clock.Timer // owner: gives up on an OnDeactivate that overruns
	// OnDeactivate's ctx, made with the timer, and what ends it — at the
	// give-up too, which runs on the silo's clock (a test's manual one,
	// say), while the ctx's own deadline is in real time. The owner writes
	// ctx once, before the hook's turn, which reads it; end and stop are
	// the owner's alone.
	ctx  context.Context
	end  context.CancelCauseFunc // on a clock other than the real one
	stop context.CancelFunc      // on the real clock, where ctx has its deadline
	// restart: the hook is a failed instance's, run before supervision's
	// restart (partition.restart), which follows it after backoff
	restart bool
	backoff time.Duration
	// givenUp: the silo gave up on the hook (partition.deactivationOverran):
	// its calls are no edges of the wait-for graph from then on. Guarded
	// by the lock of its partition's wait shard (waitShard.dropHook).
	givenUp bool
	// abandoned: the same, for its partition's owner alone, which counts
	// the hook out of the turns a Shutdown waits for (partition.abandoned)
	abandoned bool
}

// deactAbandoned reports whether a's OnDeactivate is one the owner gave up
// on (deactivationOverran). Owner only.
func deactAbandoned(a *act) bool {
	x := a.x.Load()
	return x != nil && x.deact != nil && x.deact.abandoned
}

// deferDirective keeps d for when the grain's last turn ends; of several,
// a Stop wins over a Restart.
func (x *actExtra) deferDirective(d activation.Directive) {
	if x.deferred == 0 || d == activation.Stop {
		x.deferred = uint8(d) + 1
	}
}

// takeDeferred returns the directive deferDirective kept, if any, and
// forgets it.
func (x *actExtra) takeDeferred() (activation.Directive, bool) {
	d := x.deferred
	x.deferred = 0
	return activation.Directive(d - 1), d != 0
}

// stopPoint is where a Silo.Stop request stood in its partition's message
// stream: the first ahead messages of the batch numbered seq were sent
// before it. Messages after it are not the stopped instance's: they wait
// for a fresh one. A stop by supervision has none: what arrives until the
// grain is gone is a dead letter.
type stopPoint struct {
	set   bool
	seq   uint64
	ahead int
}

// after reports whether the message at index i of batch seq was sent after
// the stop.
func (sp stopPoint) after(seq uint64, i int) bool {
	return sp.set && (seq > sp.seq || seq == sp.seq && i >= sp.ahead)
}

type timerOp struct {
	name        string
	due, period time.Duration
	msg         any
	stop        bool
	letIn       bool // the kind's WithMayInterleave predicate took msg
}

// extra returns the extra record, making it if needed. Safe from any
// goroutine.
func (a *act) extra() *actExtra {
	if x := a.x.Load(); x != nil {
		return x
	}
	a.x.CompareAndSwap(nil, &actExtra{})
	return a.x.Load()
}

// activatingNow reports whether a's OnActivate runs, for a kind that
// interleaves (the only kinds that mark it: turn.go).
func (a *act) activatingNow() bool {
	x := a.x.Load()
	return x != nil && x.activating.Load()
}

// waiting returns how many of a's turns wait in a call that lets others in.
func (a *act) waiting() int32 {
	if x := a.x.Load(); x != nil {
		return x.waiting.Load()
	}
	return 0
}

// The methods below implement grain.Self for the grain's Context. They run
// on the turn's goroutine, so they only record requests.

func (a *act) DeactivateOnIdle() {
	x := a.extra()
	x.mu.Lock()
	x.deactivate = true
	x.mu.Unlock()
}

func (a *act) DelayDeactivation(d time.Duration) {
	x := a.extra()
	if d <= 0 {
		// Cancelled, as Orleans' DelayDeactivation with a span of zero or
		// less: the owner files the idle deadline afresh (unkeep).
		x.mu.Lock()
		x.keepUntil, x.unkept = 0, true
		x.mu.Unlock()
		return
	}
	until := a.k.s.since() + min(d, maxSpan)
	x.mu.Lock()
	x.keepUntil = max(x.keepUntil, until)
	x.mu.Unlock()
}

func (a *act) StartTimer(name string, due, period time.Duration, msg any) error {
	if msg == nil {
		return grain.ErrNilMessage
	}
	if due < 0 || period < 0 {
		return fmt.Errorf("%w: timer %q due %v period %v", grain.ErrInvalidConfig, name, due, period)
	}
	// Judged here, on the turn's goroutine: the owner runs no predicate.
	letIn := a.k.takes(msg)
	x := a.extra()
	x.mu.Lock()
	why := x.refuse
	if why == refuseNone && a.k.s.baseEnded.Load() {
		why = refuseClosed
	}
	if why != refuseNone {
		x.mu.Unlock()
		return why.err(name)
	}
	x.timerOps = append(x.timerOps, timerOp{name: name, due: due, period: period, msg: msg, letIn: letIn})
	x.mu.Unlock()
	return nil
}

func (a *act) StopTimer(name string) {
	x := a.extra()
	x.mu.Lock()
	x.timerOps = append(x.timerOps, timerOp{name: name, stop: true})
	x.mu.Unlock()
}

func (a *act) Now() time.Time { return a.k.s.clock.Now() }

// DeactivationReason is why the grain deactivates, during its OnDeactivate
// (grain.Context.DeactivationReason); none before.
func (a *act) DeactivationReason() grain.DeactivationReason {
	if x := a.x.Load(); x != nil {
		return x.deactReason
	}
	return grain.DeactivationNone
}

// takeRequests returns and clears the turn's requests: DeactivateOnIdle,
// timer operations, and a cancelled keep-alive (DelayDeactivation). Owner
// only, after the turn finished.
func (a *act) takeRequests() (deactivate bool, ops []timerOp, unkept bool) {
	x := a.x.Load()
	if x == nil {
		return false, nil, false
	}
	x.mu.Lock()
	deactivate, ops, unkept = x.deactivate, x.timerOps, x.unkept
	x.deactivate, x.timerOps, x.unkept = false, nil, false
	if len(ops) > 0 && a.k.interleaves() {
		x.endTicksOnTheirWay(ops)
	}
	x.mu.Unlock()
	return deactivate, ops, unkept
}

// keepUntil returns the time until which the grain asked to be kept.
func (a *act) keepUntil() time.Duration {
	x := a.x.Load()
	if x == nil {
		return 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.keepUntil
}

// busy reports whether a turn of the activation runs.
func (a *act) busy() bool { return a.Turns > 0 }

// stoppedExplicitly reports whether a is stopping because of Silo.Stop.
func (a *act) stoppedExplicitly() bool {
	x := a.x.Load()
	return x != nil && x.stopAt.set
}
