package silo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/nilness"
)

// Overflow is what a grain does with a message that finds its backlog full
// while no turn of the grain can run: one blocked in a turn (handed off),
// activating, or on its way out. A grain whose turns run — sent messages
// faster than it handles them — does neither: its senders wait until its
// backlog has room, bounded by their ctx, and the partition's other grains
// go on (Stats().BacklogHolds counts such holds, Stats().BacklogWaits the
// sends that waited). So does a grain whose turns each wait a moment off
// the partition — in a call to another grain, in Await, a turn of a kind
// registered WithBlockingTurns — until a wait outlasts the grace below.
//
// The silo cannot tell a turn that blocks from one whose goroutine waits
// for a core: on a machine whose cores are all busy — the program's own
// goroutines sending in a loop will do — a turn can be held past
// Config.HandoffThreshold and handed off. The grain keeps its senders
// waiting for a grace of two HandoffThresholds, 100 ms at least, in which
// a preempted turn is back (Go's scheduler, or a shared host's, holds a
// turn off its core for tens of milliseconds at times) — or a turn that
// waits off the partition ends its wait, the grace counted from the moment
// its backlog filled; a turn still off then counts as blocked, and the
// policy applies to what the grain was sent past its limit. A sender that must not lose a message asks
// rather than tells, and retries on ErrOverloaded: a tell already on its
// way when the backlog filled becomes a dead letter (RejectNewest) after
// its Tell returned nil, where an ask's caller hears of it.
//
// A timer's tick waiting in the backlog is kept by either policy: it is no
// message anyone sent, and the timer's next tick is scheduled only once it
// has run.
type Overflow uint8

const (
	// RejectNewest refuses new messages at the call once the grain's backlog
	// is full: Tell and Ask return ErrOverloaded, and the refused message is
	// counted as a dead letter. A message that was on its way as the backlog
	// filled — sent before the refusals began, its Tell returned nil — and
	// finds it full becomes a dead letter too (overload; an ask's caller gets
	// ErrOverloaded): the backlog holds the limit, not the limit and all
	// that was in flight. The default.
	RejectNewest Overflow = iota
	// DropOldest makes room by dropping the oldest waiting message, which
	// becomes a dead letter (its ask fails with ErrOverloaded).
	DropOldest
)

// String returns the policy's name, as Go spells it.
func (o Overflow) String() string {
	switch o {
	case RejectNewest:
		return "RejectNewest"
	case DropOldest:
		return "DropOldest"
	}
	return "Overflow(" + strconv.Itoa(int(o)) + ")"
}

// kind is a registered grain kind. Immutable after Register.
type kind struct {
	s             *Silo
	name          string
	mayInterleave func(msg any) bool // WithMayInterleave; nil when not set (next to name: a send reads both)
	workers       int                // WithStatelessWorker: activations an identity may have; 1 for a plain kind (read by a send too)
	nameHash      uint64             // grain.KindHash(name): a send hashes only the key (read by a send too)
	factory       func(grain.ID) grain.Grain
	idleTimeout   time.Duration // < 0: never
	spareIdle     time.Duration // a stateless identity's activations but its first (WithSpareIdleTimeout); < 0: never
	callTimeout   time.Duration // bounds a call to the kind whose ctx has no deadline
	sup           activation.Supervision
	maxBacklog    int
	overflow      Overflow
	reentrant     bool
	// oneHolds: a WithMayInterleave kind, not a stateless worker's: one
	// turn at a time holds its other messages, as Orleans' blocking
	// request does (holding.go)
	oneHolds       bool
	timerKeepAlive bool
	blocking       bool           // WithBlockingTurns: each message turn starts off its partition (read by a turn)
	filters        []grain.Filter // the silo's, then the kind's own; nil when none
	// labels carries the kind's profile labels (Config.ProfileLabels), nil
	// when the silo does not label turns (labels.go): a context only
	// because pprof.SetGoroutineLabels takes one — it holds the labels and
	// nothing of any caller's. Next to filters, which a turn reads too.
	labels context.Context

	active atomic.Int64 // activations in the directory, for Stats

	optErr error // a bad option's complaint, returned by Register

	// hooksOf checks, at activation, the hooks of a grain whose type the
	// factory's signature did not tell (an interface): nil for the others,
	// checked at Register (hooks.go). Last: the fields above, which sends
	// read, keep their places.
	hooksOf func(grain.Grain) error

	stateless bool // WithStatelessWorker was given (workers may still be 1)
	spareSet  bool // WithSpareIdleTimeout was given

	// the kind's recent OnActivate and OnDeactivate hooks, which decide
	// whether its next ones start off their partition (blocking.go)
	actHooks, deactHooks hookStats
}

// maxSpan bounds the durations the silo adds to its clock's offset since
// Start — idle timeouts, quarantines, backoffs, DelayDeactivation, timers'
// due times and periods — to about 146 years, so that the sum cannot
// overflow into the past (a grain meant to stay "for ever" would go at the
// next idle tick). A longer one means the same.
const maxSpan = time.Duration(1 << 62)

// KindOption sets one property of a kind at registration. Options only ever
// change the kind being registered.
type KindOption func(*kind)

// WithIdleTimeout sets the kind's idle timeout (Config.IdleTimeout by
// default); a negative d keeps its grains active until evicted or shut down.
// Register refuses d = 0, which could mean either.
func WithIdleTimeout(d time.Duration) KindOption { return func(k *kind) { k.idleTimeout = d } }

// WithCallTimeout bounds a call to the kind's grains whose ctx has no
// deadline (Config.CallTimeout by default), as Orleans' [ResponseTimeout]
// does for an interface: a kind whose work is long (a report) or one whose
// callers should give up sooner. A ctx's own deadline always wins. Register
// refuses d <= 0.
func WithCallTimeout(d time.Duration) KindOption { return func(k *kind) { k.callTimeout = d } }

// WithSupervision sets the kind's failure policy; its zero fields take the
// silo's Config.Supervision values.
func WithSupervision(s activation.Supervision) KindOption {
	return func(k *kind) {
		base := k.sup
		if s.Decider == nil {
			s.Decider = base.Decider
		}
		if s.MaxRestarts == 0 {
			s.MaxRestarts = base.MaxRestarts
		}
		if s.Window == 0 {
			s.Window = base.Window
		}
		if s.MinBackoff == 0 {
			s.MinBackoff = base.MinBackoff
		}
		if s.MaxBackoff == 0 {
			s.MaxBackoff = base.MaxBackoff
		}
		if s.Quarantine == 0 {
			s.Quarantine = base.Quarantine
		}
		k.sup = s
	}
}

// WithMaxBacklog sets the kind's per-grain backlog limit and overflow policy
// (see Overflow for when the policy applies).
func WithMaxBacklog(n int, o Overflow) KindOption {
	return func(k *kind) { k.maxBacklog, k.overflow = n, o }
}

// WithReentrant marks the kind reentrant: while one of its turns waits in a
// Call (or in Await), other messages to the grain may run. See
// docs/calls.md.
func WithReentrant() KindOption { return func(k *kind) { k.reentrant = true } }

// WithMayInterleave lets some messages in while one of the kind's turns
// waits in a Call: those for which pred returns true run as interleaved
// turns, the others wait for the grain's turn as usual — Orleans'
// [MayInterleave], and its [AlwaysInterleave] when pred matches a message
// type. A status query or a cancellation, say, need not wait behind a turn
// that waits on a slow grain:
//
//	silo.WithMayInterleave(func(msg any) bool {
//		_, ok := msg.(GetStatus)
//		return ok
//	})
//
// A message pred lets in may overtake messages that wait in the grain's
// mailbox (as in Orleans); those it does not keep their order. A call back
// into a waiting turn's chain is allowed when pred lets its message in, and
// fails with ErrCallCycle otherwise. pred sees only the message, once,
// where it is sent: on the goroutine that calls Tell or Ask (in StartTimer
// for a timer's message), never on the silo's own. So it must be quick and
// safe for concurrent use, and must not block; a pred that panics counts as
// false (the panic is logged). WithReentrant lets every message in, with or
// without it. Await makes a wait that is no call an await point too. Register refuses a nil pred with
// ErrInvalidConfig. See docs/calls.md.
func WithMayInterleave(pred func(msg any) bool) KindOption {
	return func(k *kind) {
		if pred == nil {
			k.optErr = fmt.Errorf("%w: kind %q: WithMayInterleave(nil)", grain.ErrInvalidConfig, k.name)
			return
		}
		k.mayInterleave = pred
	}
}

// WithStatelessWorker makes the kind a stateless worker, as Orleans'
// [StatelessWorker] does: an identity of the kind may have up to n
// activations at once, each in a partition of its own, so that messages to
// one identity — a validator, a price calculator, a fan-out router — run up
// to n at a time instead of one after another. n = 0 means one per
// partition (Config.Partitions, by default one per core: Orleans' default);
// a larger n is capped there, and Register logs that it was (Info).
// Register refuses n < 0. A kind whose turns wait — on I/O, on other grains
// — rather than compute needs no more activations: made reentrant too
// (WithReentrant), with its waits in Await, each activation serves as many
// callers at once as come (Example_workThatWaits).
//
// The identity's first activation goes idle as any grain's does; the
// others, spares made while the first was busy, go once idle for
// DefaultSpareIdleTimeout (WithSpareIdleTimeout).
//
// A message goes to the least loaded of the activations (the identity's
// first and up to three others): one in a turn that blocks or runs long
// only if all those are, and otherwise by the messages sent to it and not
// yet through their turn,
// and those waiting behind busy turns in its partition — so that one
// stuck in a long turn gets nothing more while another has room. A tie
// goes to the first, so that, as in Orleans, a second activation is made
// only while the first is busy, and an identity called one call at a time
// keeps one. An ask from a grain's turn that finds the activation it was
// sent to in a turn after all, or with messages waiting, moves on to one
// that is not, if any: so a grain the worker calls can call it back from
// a turn of its own. Each activation
// is a grain of its own, built by the factory with the same identity: one
// turn at a time each, its own timers, its own supervision (one that fails
// too often is quarantined alone, and messages go to the others
// meanwhile). So keep in it no state that must be single — a cache is
// fine, a balance is not. A message a grain sends to itself may
// reach another activation. Deactivate and Stop reach them all;
// ActiveGrains lists the identity once. A call chain may not come back to a
// stateless worker's identity (ErrCallCycle), as to any grain's. A cycle
// across call chains through an activation that cannot take the call back
// fails at once (ErrCallCycle), whichever call closes it: a grain's call
// back to the identity, or the activation's own call to a grain waiting
// behind it. Stateless workers are always activated in
// the silo that sends to them.
func WithStatelessWorker(n int) KindOption {
	return func(k *kind) {
		if n < 0 {
			k.optErr = fmt.Errorf("%w: kind %q: WithStatelessWorker(%d)", grain.ErrInvalidConfig, k.name, n)
			return
		}
		k.workers = n // 0, or more than the partitions: Register caps it
		k.stateless = true
	}
}

// WithSpareIdleTimeout sets how long a stateless identity's spare
// activations — all but its first, made only while the first was busy —
// stay without a message: DefaultSpareIdleTimeout (2 s) unless set, the
// kind's idle timeout if that is shorter. So the activations a burst made
// go soon after it, as Orleans 9.2 removes idle stateless workers, while
// the first keeps the kind's idle timeout and the identity stays warm
// (with a kind that never idles, WithIdleTimeout(-1) or Config.IdleTimeout
// < 0, the first stays and the spares still go). A negative d keeps the
// spares as long as the first: for workers costly to build (a model
// loaded in OnActivate) under bursts further apart than d. Like any
// idle deactivation it comes within a tick of the idle wheel
// (Config.IdleQuantum), is called off by a message, and waits for
// DelayDeactivation; its reason is grain.DeactivationIdle. Register
// refuses d = 0, and the option on a kind without WithStatelessWorker.
func WithSpareIdleTimeout(d time.Duration) KindOption {
	return func(k *kind) {
		if d == 0 {
			k.optErr = fmt.Errorf("%w: kind %q: WithSpareIdleTimeout(0) (negative keeps the spares as long as the first)", grain.ErrInvalidConfig, k.name)
			return
		}
		k.spareIdle = d
		k.spareSet = true
	}
}

// WithTimerKeepAlive makes timer ticks count as activity for idle
// deactivation (by default they do not, as in Orleans).
func WithTimerKeepAlive() KindOption { return func(k *kind) { k.timerKeepAlive = true } }

// WithBlockingTurns declares that the kind's handler blocks — a database
// query, an HTTP request, a file, a lock — as Go code does, rather than
// computing: each of its turns (a message's, a timer tick's) starts off
// its partition, as if it began in Await, so the partition runs its other
// grains' turns at once, side by side with it, where a turn that blocks
// for less than Config.HandoffThreshold held the partition for all of it
// (docs/guide.md, "Handlers that block"). It is Akka's dispatcher for
// blocking actors, chosen for a kind: each turn pays a handoff, about a
// microsecond, so a kind whose turns mostly compute keeps its own
// partition and marks its waits with Await. The grain itself still runs
// one turn at a time — its kind's interleaving aside — its later messages
// waiting in its mailbox for the turn to end. A partition has at most
// Config.MaxBlockingTurns (64 by default) turns started off it at once;
// past them a turn starts on the partition like any other, so a burst of
// blocking work does not start a goroutine a message all at once.
func WithBlockingTurns() KindOption { return func(k *kind) { k.blocking = true } }

// Register registers a grain kind with the silo: factory builds a fresh grain
// for an identity when it is activated. It must be called before Start.
//
// Errors: ErrAlreadyStarted after Start, ErrSiloClosed after Shutdown or
// Close (or for a nil s), ErrAlreadyRegistered for a taken name,
// ErrEmptyKind / ErrInvalidKind for a bad name (grain.ObserverKind is
// taken), ErrInvalidConfig for a nil factory, a bad option, or a grain type
// whose OnActivate or OnDeactivate would never run — a method of that name
// with another signature, or one declared on *T while the factory returns a
// T (Go compiles both; the hook would be skipped without a word). A
// factory that returns an interface has each type it builds checked at its
// first activation instead, which fails the same way. Nil options are
// skipped.
func Register[G grain.Grain](s *Silo, name string, factory func(id grain.ID) G, opts ...KindOption) error {
	if err := s.made(); err != nil {
		return err
	}
	if err := grain.NewID(name, "-").Validate(); err != nil {
		var ie *grain.IDError
		if errors.As(err, &ie) { // say what was wrong with the name, not with a made-up ID
			return fmt.Errorf("%w: kind %q", ie.Err, name)
		}
		return err
	}
	if name == grain.ObserverKind {
		return fmt.Errorf("%w: kind %q is the observers'", grain.ErrInvalidKind, name)
	}
	if factory == nil {
		return fmt.Errorf("%w: nil factory for kind %q", grain.ErrInvalidConfig, name)
	}
	if err := checkHooks(name, reflect.TypeFor[G]()); err != nil {
		return err
	}
	k := &kind{
		s:           s,
		name:        name,
		nameHash:    grain.KindHash(name),
		idleTimeout: s.cfg.IdleTimeout,
		callTimeout: s.cfg.CallTimeout,
		sup:         s.cfg.Supervision,
		maxBacklog:  s.cfg.MaxBacklog,
		workers:     1,
		spareIdle:   DefaultSpareIdleTimeout,
		filters:     slices.Clip(s.cfg.Filters), // a kind's WithFilters appends to a copy
	}
	k.factory = func(id grain.ID) grain.Grain {
		g := factory(id)
		if nilness.Of(g) {
			return nil
		}
		return g
	}
	if reflect.TypeFor[G]().Kind() == reflect.Interface {
		k.hooksOf = dynamicHooks(name)
	}
	if s.cfg.ProfileLabels {
		k.labels = kindLabels(name)
	}
	for _, o := range opts {
		if o != nil {
			o(k)
		}
	}
	if k.optErr != nil {
		return k.optErr
	}
	if k.reentrant {
		k.mayInterleave = nil // every message goes in: no predicate to run
	}
	k.oneHolds = k.mayInterleave != nil && k.workers <= 1
	if k.maxBacklog <= 0 {
		return fmt.Errorf("%w: kind %q backlog %d", grain.ErrInvalidConfig, name, k.maxBacklog)
	}
	if k.overflow > DropOldest {
		return fmt.Errorf("%w: kind %q overflow policy %d (RejectNewest or DropOldest)", grain.ErrInvalidConfig, name, k.overflow)
	}
	if k.callTimeout <= 0 { // only an option sets it so: the silo's default is positive
		return fmt.Errorf("%w: kind %q call timeout %v", grain.ErrInvalidConfig, name, k.callTimeout)
	}
	if k.idleTimeout == 0 { // only an option sets it so: the silo's default is positive
		return fmt.Errorf("%w: kind %q idle timeout 0 (negative keeps its grains active)", grain.ErrInvalidConfig, name)
	}
	if err := k.sup.Validate(); err != nil {
		return err
	}
	if i := slices.IndexFunc(k.filters, isNilFilter); i >= 0 {
		return fmt.Errorf("%w: kind %q filter %d is nil", grain.ErrInvalidConfig, name, i-len(s.cfg.Filters))
	}
	if k.spareSet && !k.stateless {
		return fmt.Errorf("%w: kind %q: WithSpareIdleTimeout without WithStatelessWorker (only a stateless worker's identity has spare activations)", grain.ErrInvalidConfig, name)
	}
	asked := k.workers
	if k.stateless && (asked == 0 || asked > len(s.parts)) {
		k.workers = len(s.parts) // 0 asks for one a partition; more are capped there (logCapped)
	}
	k.idleTimeout = min(k.idleTimeout, maxSpan)
	k.spareIdle = spareIdleOf(k.spareIdle, k.idleTimeout)
	k.sup.Quarantine = min(k.sup.Quarantine, maxSpan)
	k.sup.MinBackoff = min(k.sup.MinBackoff, maxSpan)
	k.sup.MaxBackoff = min(k.sup.MaxBackoff, maxSpan)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state.Load() {
	case stateNew:
	case stateRunning:
		return grain.ErrAlreadyStarted
	default:
		return grain.ErrSiloClosed
	}
	if _, ok := s.kinds[name]; ok {
		return fmt.Errorf("%w: %q", grain.ErrAlreadyRegistered, name)
	}
	s.kinds[name] = k
	s.kindOf.remember(name, k)
	if asked > k.workers {
		s.logCapped(k.name, asked)
	}
	return nil
}

// logCapped says, once at Register, that a stateless kind was given fewer
// activations an identity than it asked for: an Orleans
// [StatelessWorker(100)] has up to 100, and a program written for a large
// machine would otherwise run with a fraction of them, unaware. Where the
// activations were to wait — on I/O, on other grains — a reentrant kind
// waiting in Await serves as many at once as come.
func (s *Silo) logCapped(kind string, asked int) {
	s.log(slog.LevelInfo, "granary: a stateless kind's activations an identity capped at the silo's partitions",
		"kind", kind, "asked", asked, "partitions", len(s.parts),
		"hint", "for turns that wait (I/O, calls), add WithReentrant and wait in silo.Await: one activation then serves many at once")
}

// isNilFilter reports a nil filter, or a typed nil (a nil FilterFunc).
func isNilFilter(f grain.Filter) bool { return nilness.Of(f) }

// spareIdleOf is the idle timeout of a stateless identity's spare
// activations, given the one asked for (WithSpareIdleTimeout, or the
// default) and the kind's own: the kind's if spares are to stay as long
// (negative) or if it is shorter, else the one asked for, bounded.
func spareIdleOf(spare, kindIdle time.Duration) time.Duration {
	switch {
	case spare < 0:
		return kindIdle
	case kindIdle > 0 && kindIdle < spare:
		return kindIdle
	}
	return min(spare, maxSpan)
}
