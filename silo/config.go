package silo

import (
	"cmp"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/nilness"
)

// Defaults for Config's zero fields. Each is chosen to match what users of
// Orleans expect unless a note says otherwise.
const (
	// DefaultCallTimeout bounds a call whose ctx has no deadline (Orleans'
	// ResponseTimeout).
	DefaultCallTimeout = 30 * time.Second
	// DefaultIdleTimeout deactivates a grain that handled no message for this
	// long (Orleans' CollectionAge).
	DefaultIdleTimeout = 15 * time.Minute
	// DefaultIdleQuantum is the largest tick of the idle wheel: a grain is
	// deactivated at most one tick after its idle timeout. With a zero
	// Config.IdleQuantum, the tick is an eighth of the shortest idle timeout
	// of the registered kinds (a stateless kind's spares' included) or of
	// Config.ActivationTimeout, which the ticks enforce, between 1 ms and
	// this.
	DefaultIdleQuantum = time.Second
	// DefaultSpareIdleTimeout deactivates a stateless identity's spare
	// activation — one beyond its first, made while the first was busy —
	// that handled no message for this long (WithSpareIdleTimeout): about
	// the 1.5 s after which Orleans 9.2 removes an idle stateless worker
	// (three idle looks 500 ms apart).
	DefaultSpareIdleTimeout = 2 * time.Second
	// DefaultActivationTimeout bounds each activation (Orleans'
	// ActivationTimeout).
	DefaultActivationTimeout = 30 * time.Second
	// DefaultDeactivationTimeout bounds each OnDeactivate (Orleans' 30 s is
	// generous for a hook that must not do much; shutdown waits on it).
	DefaultDeactivationTimeout = 10 * time.Second
	// DefaultMaxCallDepth is the most grains one call chain may hold
	// waiting (Dapr bounds reentrant chains at 32). A chain grows by a grain
	// at each call from a turn; a runaway recursion through grains would
	// otherwise grow it until memory ran out — its chains alone grow with
	// the square of its depth (10,000 deep: 2.7 GB).
	DefaultMaxCallDepth = 64
	// DefaultMaxBacklog is the most messages one grain may have waiting for
	// its turn (behind a running or blocked turn, or an activation).
	DefaultMaxBacklog = 10_000
	// DefaultQueueCapacity is the most messages a partition queue holds;
	// past it, senders wait for room (bounded by their ctx). It bounds the
	// silo's memory under a flood (1.4 MB of envelopes a partition) and
	// keeps a backlog small enough to stay in cache: about 1 ms of a
	// partition's work. Measured: 16,384 lets senders that outpace the
	// owners wait less often than 8,192 (+15 % on tell when the machine is
	// slow, even when it is fast); 32 K and more cost 10 % when it is fast.
	DefaultQueueCapacity = 16384
	// DefaultHandoffThreshold is how long a turn may hold its partition's
	// goroutine before the partition is handed to a new goroutine, so that
	// one blocked grain cannot stall the others.
	DefaultHandoffThreshold = 5 * time.Millisecond
	// MinHandoffThreshold is the smallest Config.HandoffThreshold: below it
	// the watchdog would spin (a 1 ns threshold doubled the CPU time of two
	// million tells: 518 ms against 261, with 46 handoffs), and turns
	// would be handed off faster than they run.
	MinHandoffThreshold = 10 * time.Microsecond
	// DefaultMaxBlockingTurns is how many turns a partition starts off
	// itself at once by default (Config.MaxBlockingTurns): 64 saves of 2 ms
	// make 32,000 a second a partition; a thousand calls of 50 ms, 1,300.
	DefaultMaxBlockingTurns = 64
	// DefaultName is the silo name in directory locations.
	DefaultName = "local"
)

// Config configures a silo. The zero Config is valid: every zero field takes
// its default. Durations may be negative only where a field says so.
type Config struct {
	// Name is the silo's name in directory locations, and in the error of
	// a call cycle through more than one silo (grain.CallCycleError.Silos),
	// and, unless it is the default, in every line the silo logs
	// (silo=name): give each silo of a process its own. Default "local".
	Name string
	// Partitions is the number of partition queues (and of goroutines that
	// drain them when no turn blocks). Default GOMAXPROCS; at most
	// MaxPartitions.
	Partitions int
	// CallTimeout bounds a call whose ctx has no deadline.
	CallTimeout time.Duration
	// IdleTimeout is the default idle timeout of a kind; a negative value
	// means grains are never deactivated for idleness.
	IdleTimeout time.Duration
	// IdleQuantum is the granularity of idle collection (see
	// DefaultIdleQuantum for the default); at least a millisecond, since
	// every quantum is a round of work for every partition — while any
	// grain can go idle: a silo with none does not tick.
	IdleQuantum time.Duration
	// ActivationTimeout bounds each activation — the kind's factory, then
	// OnActivate: one still running this long after it blocked its
	// partition (on Clock, checked at the idle ticks, whose default quantum
	// is at most an eighth of this bound) is given up on. The
	// activation fails with a *grain.ActivationError whose cause matches
	// context.DeadlineExceeded, and so do the messages that waited for it
	// (dead letters, reason activation failed); the hook's ctx ends; the
	// next message tries a fresh activation under the kind's restart
	// limits, while the hook goes on alone (Orleans' ActivationTimeout) —
	// during a Shutdown too, which does not wait for the hook then. A
	// timer the hook starts then is refused; a hook not yet begun (the
	// factory blocked) never runs.
	// Default DefaultActivationTimeout; negative means no bound.
	ActivationTimeout time.Duration
	// DeactivationTimeout bounds each OnDeactivate: its ctx ends then (in
	// real time; context.Cause says it overran, matching
	// context.DeadlineExceeded), and a hook still running a HandoffThreshold
	// later (on Clock) is given up on — its ctx ended too, its grain
	// removed without it.
	DeactivationTimeout time.Duration
	// MaxActivations caps the activations in the silo (split evenly across
	// partitions); a new activation past the cap first deactivates the least
	// recently used idle grain of its partition. The cap is soft: a grain
	// being evicted counts in Stats until its OnDeactivate has run (a burst
	// of new grains passes the cap by up to 256 a partition so), and when
	// every grain of the partition is busy the new one is activated anyway —
	// a message is never refused for it. 0 means no cap.
	MaxActivations int
	// MaxBlockingTurns bounds the turns a partition starts off itself at
	// once, each on a goroutine of its own: those of a kind
	// WithBlockingTurns, and the OnActivate and OnDeactivate hooks of a kind
	// whose hooks have been blocking. Past it a turn starts on the
	// partition like any other, which it holds until it ends or the
	// handoff threshold hands it on — a burst of blocking work, a Shutdown
	// of a million grains saving to a slow store, starts goroutines (and
	// work at the store) at that pace, not all at once. Akka's blocking
	// dispatcher's pool size, for a partition. Default
	// DefaultMaxBlockingTurns; negative means no bound (each turn goes off
	// as it begins, as a wait in Await does).
	MaxBlockingTurns int
	// MemoryLimit, if positive, sheds activations under memory pressure
	// (Orleans' activation shedding): at each idle tick, while the memory
	// MemoryGauge reports is above MemoryLimit bytes, every partition
	// deactivates the share of its activations that would bring it down to
	// ShedTargetPercent of the limit if memory were spread evenly
	// over them — idle-collectable grains only, those nearest their idle
	// deadline first (for one idle timeout, the least recently active).
	// Grains that never go idle (an idle timeout < 0), busy grains, grains
	// with messages waiting and grains kept by DelayDeactivation are not
	// shed. Each shed grain runs its OnDeactivate, as at its idle timeout;
	// Stats().Shed counts them. While memory is past the limit, the silo
	// looks at it every 100 ms between idle ticks too, and sheds at each
	// look: a burst of activations can still pass the limit by what it
	// allocates in a few tenths of a second: set it below what the
	// process may use by that much. 0 means off, the default (as in Orleans).
	MemoryLimit int64
	// MemoryGauge reports the memory MemoryLimit is held to. Default: the
	// Go heap's live bytes as measured by the last GC (runtime/metrics
	// /gc/heap/live:bytes), the state the program keeps and not its garbage;
	// the silo decides on each GC's figure once, and when the heap (garbage
	// included) has grown past MemoryLimit since the last GC, it asks for a
	// GC rather than wait for the heap to double before hearing of it.
	MemoryGauge MemoryGauge
	// MaxCallDepth is the most grains one call chain may hold waiting: a
	// call from a turn whose chain holds that many already fails at once
	// with ErrCallTooDeep. Default DefaultMaxCallDepth; negative means no
	// limit.
	MaxCallDepth int
	// MaxBacklog is the default per-grain backlog limit of a kind
	// (WithMaxBacklog; Overflow says what a full backlog does).
	MaxBacklog int
	// QueueCapacity is the most messages each partition queue holds.
	QueueCapacity int
	// HandoffThreshold: see DefaultHandoffThreshold. At least
	// MinHandoffThreshold: the watchdog looks at every partition once a
	// threshold while turns run.
	HandoffThreshold time.Duration
	// Supervision is the default failure policy of a kind; zero fields take
	// the activation package defaults (restart on panic, 10 restarts in 10 s,
	// backoff 10 ms doubling to 1 s, quarantine 5 s).
	Supervision activation.Supervision
	// Clock is the silo's time source. Default the real clock; tests pass a
	// *clock.Manual.
	Clock clock.Clock
	// Filters run around every message turn of every kind, the first
	// outermost, before the kind's own (WithFilters): see grain.Filter.
	// None may be nil.
	Filters []grain.Filter
	// SendFilters run on the sender's side, the first outermost, around
	// every message a grain sends through its Context's Silo() — Tell, Ask,
	// silo.Call, grain.Observers.Notify — and every one sent through
	// Silo.Runtime(), which code outside the grains may use to have its
	// sends filtered too: see grain.SendFilter. The Silo's own Tell and Ask
	// are not filtered (as Orleans keeps a client's outgoing filters apart
	// from its silos'), and a grain's sends pay nothing for them when
	// there are none. None may be nil.
	SendFilters []grain.SendFilter
	// Propagator carries what a program keeps in a ctx — a trace's span,
	// a tenant — from a Tell to the turn that handles it (see
	// ContextPropagator). Nil, the default, carries nothing: a tell's
	// handler sees none of its sender's ctx values.
	Propagator ContextPropagator
	// Logger receives what the silo cannot return to anyone: a panic in
	// OnDeactivate, a tell's turn that failed, a tell's dead letter (Info),
	// a slow turn. Default (nil): slog.Default(), as it is when each line
	// is written — so a program that calls slog.SetDefault gets the silo's
	// lines too, and one that sets nothing sees them on stderr, as Akka and
	// protoactor log their dead letters. For silence,
	// slog.New(slog.DiscardHandler); Stats counts what was logged either
	// way.
	//
	// The silo writes its lines in the order it logs them, on a goroutine
	// of its own, so a handler that is slow or blocks — a full pipe, a log
	// shipper pushing back — holds up no grain; up to 1,024 lines wait for
	// it, and the rest are dropped and counted (Stats.DroppedLogLines).
	// Shutdown and Close return once the lines logged before them are
	// written, but wait at most a second for a handler stuck on one line.
	Logger *slog.Logger
	// ProfileLabels labels the goroutine that runs each turn with the pprof
	// label ProfileLabelKind ("granary.kind") set to its grain's kind, so
	// that CPU and goroutine profiles say which kinds the time went to:
	// go tool pprof -tagfocus granary.kind=player. Goroutines a handler
	// starts inherit the label; the silo's own work between turns counts
	// towards the kind it served last. Off by default: a goroutine pays a
	// label switch when its turn is of another kind than its last.
	ProfileLabels bool
	// CheckContexts gives each turn a grain.Context of its own, which
	// panics with a *grain.ContextAfterTurnError if used after its turn
	// has ended (ID, Sender, its timers and deactivation controls; Silo
	// and Now, the same for every turn, still answer), as a testing.T does
	// once its test is over: a handler that hands its gc to a goroutine
	// outliving the turn — pipe-to-self written with gc.ID() inside the
	// goroutine — fails loudly where it runs, instead of that goroutine
	// reading whatever turn the worker runs next (another grain's
	// identity; a timer started on another grain). It also refuses a call
	// a turn makes with a ctx that is not the turn's — context.Background(),
	// a ctx kept in a struct — with grain.ErrForeignContext, at once: such
	// a call carries no call chain, so a cycle through it is a deadlock the
	// silo cannot see (unchecked, it waits for the call's timeout, whose
	// *grain.TimeoutError then says so: ForeignContext). For tests
	// (silotest.Start turns it on): it costs a 64-byte allocation a turn
	// (BenchmarkTellCheckedContexts), and a look at the caller's stack
	// (1.5–3 µs, BenchmarkCallCheckedContexts) a call made from outside
	// any turn, so it is off by default.
	CheckContexts bool
	// LogSampling bounds the lines written to Logger with any one message,
	// so that a storm of failures writes a sample of them and a count, not
	// a line each. Default: the first 10 a second of each message.
	LogSampling LogSampling
}

func (c Config) withDefaults() Config {
	c.Name = cmp.Or(c.Name, DefaultName)
	c.Partitions = cmp.Or(c.Partitions, runtime.GOMAXPROCS(0))
	c.CallTimeout = cmp.Or(c.CallTimeout, DefaultCallTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.DeactivationTimeout = cmp.Or(c.DeactivationTimeout, DefaultDeactivationTimeout)
	c.ActivationTimeout = cmp.Or(c.ActivationTimeout, DefaultActivationTimeout)
	c.MaxBacklog = cmp.Or(c.MaxBacklog, DefaultMaxBacklog)
	c.MaxCallDepth = cmp.Or(c.MaxCallDepth, DefaultMaxCallDepth)
	c.QueueCapacity = cmp.Or(c.QueueCapacity, DefaultQueueCapacity)
	c.HandoffThreshold = cmp.Or(c.HandoffThreshold, DefaultHandoffThreshold)
	c.MaxBlockingTurns = cmp.Or(c.MaxBlockingTurns, DefaultMaxBlockingTurns)
	// The silo gives up on an OnDeactivate at the sum of these two: each
	// held to half of maxSpan, the largest Duration meaning "never" does not
	// overflow it into an immediate give-up.
	c.DeactivationTimeout = min(c.DeactivationTimeout, maxSpan/2)
	c.ActivationTimeout = min(c.ActivationTimeout, maxSpan/2)
	c.HandoffThreshold = min(c.HandoffThreshold, maxSpan/2)
	c.Supervision = c.Supervision.WithDefaults()
	c.Filters = slices.Clone(c.Filters) // the caller's slice may change after New
	c.SendFilters = slices.Clone(c.SendFilters)
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.MemoryGauge == nil {
		c.MemoryGauge = heapGauge{}
	}
	c.LogSampling.Tick = cmp.Or(c.LogSampling.Tick, DefaultLogTick)
	c.LogSampling.First = cmp.Or(c.LogSampling.First, DefaultLogFirst)
	return c
}

// MaxPartitions bounds Config.Partitions. Each partition is a goroutine and
// about 21 KB before it holds a grain, and more partitions than a few per
// core only add owners competing for the same cores: a count above this is
// a mistake (a million would take about 22 GB, and Start had not finished
// after 70 s), refused with ErrInvalidConfig rather than attempted.
const MaxPartitions = 1 << 16

// validate reports the first field out of range. It runs on the config as
// given, before defaults, so that an explicit bad value is never masked.
func (c Config) validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: %s = %v", grain.ErrInvalidConfig, field, v)
	}
	switch {
	case c.Partitions < 0:
		return bad("Partitions", c.Partitions)
	case c.Partitions > MaxPartitions:
		return fmt.Errorf("%w: Partitions = %d, more than MaxPartitions (%d)", grain.ErrInvalidConfig, c.Partitions, MaxPartitions)
	case c.CallTimeout < 0:
		return bad("CallTimeout", c.CallTimeout)
	case c.IdleQuantum < 0, c.IdleQuantum > 0 && c.IdleQuantum < time.Millisecond:
		return bad("IdleQuantum", c.IdleQuantum)
	case c.DeactivationTimeout < 0:
		return bad("DeactivationTimeout", c.DeactivationTimeout)
	case c.MaxActivations < 0:
		return bad("MaxActivations", c.MaxActivations)
	case c.MemoryLimit < 0:
		return bad("MemoryLimit", c.MemoryLimit)
	case c.MemoryGauge != nil && nilness.Of(c.MemoryGauge): // a nil MemoryGaugeFunc too
		return bad("MemoryGauge", fmt.Sprintf("a nil %T", c.MemoryGauge))
	case c.MaxBacklog < 0:
		return bad("MaxBacklog", c.MaxBacklog)
	case c.QueueCapacity < 0:
		return bad("QueueCapacity", c.QueueCapacity)
	case c.HandoffThreshold < 0, c.HandoffThreshold > 0 && c.HandoffThreshold < MinHandoffThreshold:
		return bad("HandoffThreshold", c.HandoffThreshold)
	case c.LogSampling.Tick < 0:
		return bad("LogSampling.Tick", c.LogSampling.Tick)
	case isNilPointer(c.Clock):
		return bad("Clock", fmt.Sprintf("a nil %T", c.Clock))
	case !validPropagator(c.Propagator):
		return bad("Propagator", fmt.Sprintf("a %T that cannot be called", c.Propagator))
	}
	for i, f := range c.Filters {
		if isNilFilter(f) {
			return bad(fmt.Sprintf("Filters[%d]", i), "nil")
		}
	}
	for i, f := range c.SendFilters {
		if nilness.Of(f) {
			return bad(fmt.Sprintf("SendFilters[%d]", i), "nil")
		}
	}
	return c.Supervision.Validate()
}

// isNilPointer reports whether v holds a nil pointer: an interface that is
// not nil, yet whose methods would dereference nil (a *clock.Manual declared
// and never made, say).
func isNilPointer(v any) bool {
	if v == nil {
		return false
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
