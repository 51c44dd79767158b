package silo_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// TestAgainstAModelWithMessagesInFlight drives its grains from one
// goroutine, so that a model can say what each answer must be. This test
// drives them from several at once, as a service's request handlers do:
// each client runs a script rapid drew — tells, asks (some with a deadline
// short enough to end before the turn — in a fourth of the runs none, but
// a Config.CallTimeout of 20–500 µs — some with a ctx ended before the
// send), asks that make the grain tell or ask another key or itself, asks
// that make it call a grain (itself too) that calls it back on an
// AllowCallChainReentrancy chain (in a fourth of the runs refused, with
// ErrCallTooDeep, by a Config.MaxCallDepth of 1), turns that wait in silo.Await for
// something outside (the grains that interleave letting others in
// meanwhile) and then send, panics (restart), errors its supervision
// stops the grain for (a quarantine) or resumes it for, activations that
// fail, DeactivateOnIdle, DelayDeactivation, timers started, replaced and
// stopped (their ticks keeping the plain grains alive in half the runs;
// one started in OnActivate by every other activation, one refused in
// OnDeactivate, and one refused in an OnActivate the silo gave up on),
// notifications to the clients' observers (each grain subscribes the
// asking client's observer to its grain.Observers and notifies them all;
// the clients read their observers now and then, close them and make new
// ones, in either silo, their buffers small enough to fill),
// Stops and Deactivates from turns (of another grain, or the turn's own),
// ActiveGrains, goodbyes from OnDeactivate (a tell to the next grain, a
// notification to the subscribers; in half the runs OnActivate and
// OnDeactivate wait for something outside first, a load and a save, in
// silo.Await — in a third of those, one wait in three for longer than
// the hook's bound, Config.ActivationTimeout or DeactivationTimeout, which
// the silo gives up on), Deactivate and Stop, and jumps of the clock — the real
// clock, made to jump forward as a paused process finds it has (jumpClock)
// — on two silos of the process, one grain in the second, which the
// first's grains call and tell (and it tells them, and calls them back on
// a chain that lets it), each silo ending on its own, early or late; in
// half the runs with idle collection every few milliseconds, in half
// with a propagator carrying each client step's value in its ctx through
// tells (Config.Propagator), in a third under an activation cap of one grain a partition, in a third with
// memory always short (Config.MemoryLimit: each idle tick sheds), in half
// through a filter around every turn and one around every send, each
// turn's grain.Context its own and a call a turn makes with
// context.Background() — from its hooks and one message turn in five —
// refused (Config.CheckContexts), and its goroutine
// labelled by its kind (Config.ProfileLabels); of its
// seven grains one is of a reentrant kind, one of a kind that lets some
// messages in (WithMayInterleave) and one a stateless worker of two
// activations; in a sixth of the runs each partition queue holds four
// messages (sends wait for room), in a third each grain's backlog three
// (senders refused, held at its door, or its oldest dropped). Each silo
// ends with a Shutdown — some hasty, its ctx ending within 2 ms, most
// often before its work has, some cut short by a Close while it runs,
// some begun by a grain's turn, some called twice at once — or a Close,
// some from a grain's turn, in half the runs while the clients still
// send. No one order of the clients' steps is
// known, so the test checks what the silo promises whatever the order:
//
//   - per sender and grain, messages are handled in the order sent —
//     a client's, and a grain's sends across its activations — across
//     deactivations, restarts, stops and evictions (docs/architecture.md,
//     "Order"), gaps only where a message became a dead letter;
//   - every message sent is handled once or is one dead letter, never
//     both — a notification received once by the observer it was told to,
//     from the grain that told it, or a dead letter as its observer's
//     buffer was full or its client closed it; an answered ask was handled,
//     and its reply is the one its turn returned; Notify drops the
//     observers it found closed, and counts the other refusals;
//   - a handler sees the grain that sent its message as its sender
//     (grain.Context.Sender), none for a client's, another silo's grain's
//     or a tick;
//   - a handler's ctx holds its client step's value if an ask's caller's
//     ctx did (an ask runs under it) or a propagator carried it with a
//     tell, and no value otherwise; a notification carries it so too;
//   - every dead letter a silo counts (Stats) its subscriber saw; a
//     refused send is neither handled nor one; a dead letter's reason is one the run could have caused, when it could
//     (stopped: by a Stop not over before the message was sent), and
//     never shutdown in a graceful Shutdown: what it took finishes;
//   - what a client sends after its own Stop of a grain is handled by a
//     later activation than anything it sent before (silo.Stop's line),
//     and after its own Deactivate by a later one than its last answer
//     came from (a kind that lets turns interleave aside);
//   - no activation deactivated as idle, or shed for memory, before the
//     time it asked to be kept until (DelayDeactivation); and none for a
//     reason the run gave no cause for (grain.Context.DeactivationReason:
//     requested with no DeactivateOnIdle or Deactivate, evicted with no
//     cap, failed with no turn failed, and so on);
//   - an activation the silo gave up on as it activated handles nothing,
//     and what waited for it is a dead letter (activation failed);
//   - one activation of a key live at a time, one turn running at a time
//     in it (another may run only while one waits in a call), a timer's
//     ticks among them;
//   - a tick runs in the activation that started its timer, never after
//     its OnDeactivate, nor after a turn stopped or replaced the timer
//     (grain.Context.StopTimer: "no tick of it after this turn"), nor more
//     than once for a timer of one tick; and it is never a dead letter;
//   - no ask waits: each is answered or fails well within its bound;
//   - each silo, stopped, holds no activation and nothing queued (Stats),
//     leaves no clock timer set (jumpClock counts them), and counts no
//     more restarts and stops than its grains' turns failed.
//
// It found a reentrant grain's sends out of order
// (TestAnInterleavedTurnsSendsFollowTheCallThatLetItIn), a reentrant
// grain's stale tick delivered
// (TestATickLetInBehindATurnThatEndsItsTimerIsNotDelivered), and two
// messages sent before a Stop handled after it, by the fresh instance: one
// as the grain went in the round that read the Stop
// (TestAMessageSentBeforeAStopIsADeadLetterThoughTheGrainWentMeanwhile),
// one as its supervision's quarantine ended before it went
// (TestAStopDrawsItsLineThoughTheGrainsQuarantineEndsFirst), and a
// Shutdown held until its ctx ended by a hook it had given up on, or by an
// activation it did not give up on
// (TestAShutdownGivesUpOnAnActivationThatHangs,
// TestAShutdownDoesNotWaitForAnOnDeactivateItGaveUpOn), and a given-up
// OnActivate's ctx saying Canceled once the hook had returned
// (TestAHandlersCtxEndedBeforeItsTurnSaysSoAfterTheTurn). A failing run
// prints the clients' scripts and, for a Stop's line or two activations
// live at once, what the grain went through (its hooks, activations,
// deactivations, failures, Stops, and the silo's log lines about it);
// rapid, which cannot make the same interleaving happen again, calls it
// flaky and shrinks nothing.
func TestSeveralClientsAtOnceKeepEveryPromise(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		parts := rapid.IntRange(1, 4).Draw(rt, "partitions")
		cfg := silo.Config{
			Clock:      new(jumpClock),
			Partitions: parts,
		}
		if rapid.IntRange(0, 2).Draw(rt, "capped") == 0 {
			cfg.MaxActivations = parts // one a partition: any other evicts it
		}
		if rapid.Bool().Draw(rt, "idle") {
			cfg.IdleTimeout, cfg.IdleQuantum = 3*time.Millisecond, time.Millisecond
		}
		var r cRun
		r.keepAlive = rapid.Bool().Draw(rt, "ticks keep alive") // the plain kind's
		r.hooksWait = rapid.Bool().Draw(rt, "hooks wait")
		if r.hooksWait && rapid.IntRange(0, 2).Draw(rt, "overrun") == 0 {
			// Now and then a hook's load or save hangs past its bound,
			// which the silo gives up on (cBook.hookIO).
			r.overrun = true
			cfg.ActivationTimeout, cfg.DeactivationTimeout = 3*time.Millisecond, 3*time.Millisecond
			cfg.IdleQuantum = time.Millisecond // the give-ups' checks
		}
		if rapid.Bool().Draw(rt, "dressed") {
			// A filter around every turn, one around every send of a
			// grain's, and each turn's grain.Context its own.
			cfg.Filters = []grain.Filter{grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
				return next.Receive(ctx, c, msg)
			})}
			cfg.SendFilters = []grain.SendFilter{grain.SendFilterFunc(func(ctx context.Context, s grain.Send, next grain.SendNext) (any, error) {
				return next(ctx, s)
			})}
			cfg.CheckContexts = true
			r.checked = true
			cfg.ProfileLabels = true // each turn's goroutine labelled by its kind
		}
		if rapid.Bool().Draw(rt, "propagate") {
			// A tell's handler's ctx holds its sender's client step.
			cfg.Propagator = valuePropagator[cRoot](cRootKey{})
		}
		if rapid.IntRange(0, 2).Draw(rt, "memory pressure") == 0 {
			// Memory always short: each idle tick sheds what it may.
			cfg.MemoryLimit = 1
			cfg.MemoryGauge = silo.MemoryGaugeFunc(func() uint64 { return 1 << 40 })
		}
		n := rapid.IntRange(2, 5).Draw(rt, "clients")
		scripts := make([][]cOp, n)
		for i := range scripts {
			scripts[i] = rapid.SliceOfN(cOpGen(), 20, 200).Draw(rt, fmt.Sprint("client ", i))
		}
		// How each silo ends, and when: after every client has finished,
		// or early, at a client's step.
		var ends [2]cEnd
		for i, name := range []string{"A", "B"} {
			e := cEnd{silo: name, how: rapid.SampledFrom([]string{"shutdown", "shutdown early", "close", "close early", "hasty shutdown", "hasty shutdown early", "shutdown cut short", "shutdown cut short early", "shutdown from a turn", "shutdown from a turn early", "close from a turn", "close from a turn early", "shutdown twice", "shutdown twice early"}).Draw(rt, "end of "+name)}
			e.by, e.at = rapid.IntRange(0, n-1).Draw(rt, name+" ended by"), rapid.IntRange(0, 200).Draw(rt, name+" ended at")
			if !strings.HasSuffix(e.how, "early") {
				e.at = -1
			}
			ends[i] = e
		}
		// Squeezed: in a sixth of the runs each partition queue holds 4
		// messages (sends wait for room), in a third each grain's backlog
		// 3, refusing the newest or dropping the oldest past it.
		var backlog []silo.KindOption
		switch rapid.IntRange(0, 5).Draw(rt, "squeeze") {
		case 1:
			cfg.QueueCapacity = 4
		case 2:
			backlog = append(backlog, silo.WithMaxBacklog(3, silo.RejectNewest))
		case 3:
			backlog = append(backlog, silo.WithMaxBacklog(3, silo.DropOldest))
		}
		if rapid.IntRange(0, 3).Draw(rt, "depth capped") == 0 {
			// A call chain may hold one grain waiting: a call back into
			// a grain whose turn waits (cBounce) fails with
			// ErrCallTooDeep, sending nothing.
			cfg.MaxCallDepth = 1
		}
		if rapid.IntRange(0, 3).Draw(rt, "timed") == 0 {
			// The clients' short asks carry no deadline: the silo's
			// default call timeout, this short, bounds them (the only asks
			// without one: a turn's inherit their client's).
			r.timed = true
			cfg.CallTimeout = time.Duration(rapid.IntRange(20, 500).Draw(rt, "call timeout")) * time.Microsecond
		}
		obsBuf := rapid.IntRange(1, 4).Draw(rt, "observer buffer") // small: a client that reads late finds some refused
		r.obsBuf = obsBuf
		runClients(rt, cfg, backlog, r, scripts, ends)
	})
}

const cAskBound = 20 * time.Second // an ask still waiting after this has hung

var (
	errCFatal = errors.New("clients model: fatal")
	errCOops  = errors.New("clients model: oops") // its supervision resumes the grain
)

// cDo is what a message makes its grain do, after noting it.
type cDo uint8

const (
	cNote    cDo = iota
	cFwdTell     // tell To a message of its own
	cFwdAsk      // ask To a message of its own
	cBoom        // panic: the grain restarts
	cFatal       // fail with errCFatal: its supervision stops and quarantines it
	cLeave       // DeactivateOnIdle
	cBounce      // ask To, on a chain that lets calls back in, a cBack
	cBack        // ask To (the grain that bounced it) a message back, on the chain
	cTimer       // start the activation's timer, replacing the one it had
	cUntimer     // stop the activation's timer
	cKeep        // DelayDeactivation(Due)
	cAwait       // wait in silo.Await for an answer from outside (I/O), then tell To a message of its own
	cOops        // fail with errCOops: its supervision resumes it, the same instance going on
	cNotify      // subscribe Obs (if not zero) to the activation's grain.Observers, then Notify them all
	cStopTo      // Silo.Stop To (itself too) from the turn
	cDeactTo     // Silo.Deactivate To (itself too) from the turn
)

// cMsg is every message of the test: the n-th its sender sent key, under
// an ID of the run.
type cMsg struct {
	ID   uint64
	From string
	N    int
	Do   cDo
	To   string
	// cTimer: the timer's due time and period (0: one tick); cKeep: how
	// long to keep the grain
	Due, Period time.Duration
	Obs         grain.ID // cNotify: the sending client's observer
	Bye         bool     // sent from OnDeactivate (cGrain.goodbye)
}

// cTick is a timer's tick: the activation that started the timer, and
// which of its timers (the gen-th it started).
type cTick struct {
	Key       string
	Inst, Gen int
}

// cOp is one step of a client's script.
type cOp struct {
	Op     string // tell, ask, short, fwd, bounce, await, boom, fatal, oops, leave, timer, untimer, keep, notify, read, reopen, poison, deactivate, stop, jump
	Key    string
	To     string        // reopen: the silo of the new observer
	Ask    bool          // fwd: ask To, not tell; notify: ask Key, not tell
	Expiry time.Duration // short: the ask's deadline, 0 for a ctx ended before; jump: how far; timer: its due time; keep: how long
	Period time.Duration // timer: its period, 0 for one tick
}

func (o cOp) String() string {
	switch o.Op {
	case "fwd":
		return fmt.Sprintf("fwd %s→%s ask=%v", o.Key, o.To, o.Ask)
	case "bounce":
		return fmt.Sprintf("bounce %s→%s→%s", o.Key, o.To, o.Key)
	case "await", "stopfrom", "deactfrom":
		return fmt.Sprintf("%s %s→%s", o.Op, o.Key, o.To)
	case "short":
		return fmt.Sprintf("short %s %v", o.Key, o.Expiry)
	case "jump":
		return fmt.Sprint("jump ", o.Expiry)
	case "timer":
		return fmt.Sprintf("timer %s %v/%v", o.Key, o.Expiry, o.Period)
	case "keep":
		return fmt.Sprintf("keep %s %v", o.Key, o.Expiry)
	case "notify":
		return fmt.Sprintf("notify %s ask=%v", o.Key, o.Ask)
	case "active":
		return "active " + cID(o.Key).Kind() + " in " + cSiloOf(o.Key)
	case "read":
		return "read"
	case "reopen":
		return "reopen in " + o.To
	}
	return o.Op + " " + o.Key
}

// cKeys are the grains: "x" in a second silo (cSiloOf), "d" of a reentrant kind, "e" of a kind that lets
// in plain notes (cNote) and its timer's ticks while one of its turns
// waits — the notes may overtake its other messages, so that a sender's
// notes and its others are two orders — "w" a stateless worker of two
// activations — several live at once, each message to one of them, so no
// order holds among them, nor any line of a Stop or Deactivate between two
// of them — "v" a stateless worker of two activations that is reentrant
// too (the guide's kind for work that waits), the others of a plain kind.
var cKeys = []string{"a", "b", "c", "d", "e", "w", "v", "x"}

// cWorker reports whether key's grain is a stateless worker's: several
// activations live at once.
func cWorker(key string) bool { return key == "w" || key == "v" }

// cInterleaves reports whether key's grain lets messages in while one of
// its turns waits (reentrant, or a WithMayInterleave kind).
func cInterleaves(key string) bool { return key == "d" || key == "e" || key == "v" }

// cSiloOf names the silo key's grain lives in: "x" in a second silo of
// the process, of the plain kind, which the first's grains call and tell
// and the clients reach as well; the others in the first. A client's
// observer's key (cObs) names its silo.
func cSiloOf(key string) string {
	switch {
	case key == "x":
		return "B"
	case strings.HasPrefix(key, "o"):
		return key[1:2]
	}
	return "A"
}

func cID(key string) grain.ID {
	switch key {
	case "d":
		return grain.NewID("cre", key)
	case "e":
		return grain.NewID("cmi", key)
	case "w":
		return grain.NewID("csw", key)
	case "v":
		return grain.NewID("csr", key)
	}
	return grain.NewID("cm", key)
}

func cOpGen() *rapid.Generator[cOp] {
	return rapid.Custom(func(t *rapid.T) cOp {
		o := cOp{
			Op: rapid.SampledFrom([]string{
				"tell", "tell", "tell", "tell", "tell", "ask", "ask", "ask", "ask", "short", "fwd", "fwd",
				"bounce", "await", "boom", "fatal", "oops", "leave", "timer", "untimer", "keep", "poison", "deactivate", "stop", "jump", "jump",
				"notify", "notify", "read", "read", "reopen", "stopfrom", "deactfrom", "active",
			}).Draw(t, "op"),
			Key: rapid.SampledFrom(cKeys).Draw(t, "key"),
		}
		switch o.Op {
		case "bounce", "await", "stopfrom", "deactfrom":
			o.To = rapid.SampledFrom(cKeys).Draw(t, "to")
		case "fwd":
			o.To = rapid.SampledFrom(cKeys).Draw(t, "to")
			o.Ask = rapid.Bool().Draw(t, "ask")
		case "notify":
			o.Ask = rapid.Bool().Draw(t, "ask")
		case "reopen":
			o.To = rapid.SampledFrom([]string{"A", "B"}).Draw(t, "silo")
		}
		// The second silo's grain never waits on the first's but on a
		// chain that lets it back in: its calls and theirs on other chains
		// could close a cycle across the two silos, which no deadlock walk
		// sees (docs/calls.md) — an ask left to its bound.
		if o.Key == "x" && o.To != "" && cSiloOf(o.To) == "A" {
			switch o.Op {
			case "fwd":
				o.Ask = false
			case "bounce":
				o.To = "x"
			}
		}
		// Nor does it call the stateless worker back: its call back may
		// go to the worker's other activation, which may be waiting on it.
		if cWorker(o.Key) && o.Op == "bounce" && o.To == "x" {
			o.To = o.Key
		}
		switch o.Op {
		case "short":
			o.Expiry = time.Duration(rapid.IntRange(0, 300).Draw(t, "expiry")) * time.Microsecond
		case "jump":
			o.Expiry = time.Duration(rapid.IntRange(1, 6).Draw(t, "jump")) * time.Millisecond
		case "timer":
			o.Expiry = time.Duration(rapid.IntRange(0, 3000).Draw(t, "due")) * time.Microsecond
			o.Period = time.Duration(rapid.IntRange(0, 3000).Draw(t, "period")) * time.Microsecond
		case "keep":
			o.Expiry = time.Duration(rapid.IntRange(-1, 8).Draw(t, "keep")) * time.Millisecond
		}
		return o
	})
}

// cSent is what became of one message.
type cSent struct {
	from, key string
	ask       bool
	short     bool // sent under a ctx of a short deadline: it may end before the send
	root      cRoot
	carry     bool  // its handler's ctx holds root (cRootKey), and what an observer receives carries it
	sentAt    int64 // when its send began and ended, on the book's count (cBook.seq)
	back      int64
	sendErr   error
	reply     any  // an answered ask's: the handling activation's number
	returned  bool // the send returned (sendErr is its error)
	handled   int
	inst      int // the activation that handled it
	dead      []grain.Reason
	// began: when its first turn began, on the book's count; do: what it
	// asked its grain to do (crossOrder)
	began int64
	do    cDo
}

// cBook is what the grains and clients share. Safe for concurrent use.
type cBook struct {
	mu        sync.Mutex
	msgs      []*cSent          // by ID-1
	next      map[string]int    // per "from>key": the last N given
	handledOf map[string][]cMsg // per "from>key": the messages handled, in turn
	insts     map[string]int    // activations of each key so far
	live      map[string]bool
	poison    map[string]bool
	overload  bool            // a backlog or queue small enough to overflow
	propagate bool            // Config.Propagator carries a tell's cRootKey
	graceful  map[string]bool // per silo: it ends with a Shutdown, whose bound nothing reaches
	silos     map[string]*silo.Silo
	seq       int64              // counts the sends' and events' beginnings and ends: what happened before what
	events    []*cEvent          // what may explain a dead letter
	ticks     int                // timer ticks handled
	io        chan chan struct{} // what an Await waits on: a goroutine answers (outside)
	ioQuit    chan struct{}      // closed when the run is over
	hooksWait bool               // OnActivate and OnDeactivate wait on io
	// overrun: now and then a hook's wait lasts past its bound
	// (cBook.hookIO); hooks counts the waits, slow those under way, which
	// slowQuit ends once the silos have stopped
	overrun bool
	timed   bool // the clients' short asks have no deadline but Config.CallTimeout
	// checked: each turn's grain.Context its own, and a call from a turn
	// with a ctx not the turn's refused (Config.CheckContexts)
	checked bool
	// depthCapped: a call chain may hold one grain waiting
	// (Config.MaxCallDepth)
	depthCapped bool
	hooks       int
	objs        atomic.Int64 // the instances made: each its serial (cGrain.obj)
	slow        sync.WaitGroup
	slowQuit    chan struct{}
	liveG       map[string]*cGrain // the live activation of each key (but w's)
	failures    map[string]*[2]int // per silo: the turns that panicked (cBoom), that failed fatally (cFatal)
	violations  []string
	// what may deactivate a grain: idle collection, an activation cap,
	// memory short (Config)
	idle, capped, short bool
	// The clients' observers: every one made, and by ID and by key
	observers []*cObs
	obsKey    map[grain.ID]string
	obsID     map[string]grain.ID
	obsBuf    int
	// endMu orders a client's Close of an observer with the start of its
	// silo's end (ending): a Close after the silo stopped makes what its
	// observer held dead letters no subscriber sees (Observer.Close; still
	// counted in Stats), which the run could not tell from lost ones.
	endMu  sync.RWMutex
	ending map[string]bool
}

// cObs is a client's observer, and its key in the book: "o", its silo's
// name, a number.
type cObs struct {
	o   *silo.Observer
	key string
}

// isObs reports whether key is an observer's.
func isObs(key string) bool { return strings.HasPrefix(key, "o") }

// newObserver makes an observer in the silo named, or says why not: nil
// once the silo has begun to stop.
func (b *cBook) newObserver(name string) *cObs {
	o, err := b.silos[name].NewObserver(b.obsBuf)
	if err != nil {
		if !errors.Is(err, grain.ErrSiloClosed) {
			b.violate("NewObserver(%d) in %s: %v", b.obsBuf, name, err)
		}
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ob := &cObs{o: o, key: fmt.Sprintf("o%s%d", name, len(b.observers)+1)}
	b.observers = append(b.observers, ob)
	b.obsKey[o.ID()], b.obsID[ob.key] = ob.key, o.ID()
	return ob
}

// cSenderOf is the sender the handler of a message from from to key is to
// see: the grain that sent it, if it is of key's silo (grain.Context.Sender),
// else none.
func cSenderOf(from, key string) grain.ID {
	g, ok := strings.CutPrefix(from, "g:")
	if !ok {
		return grain.ID{} // a client's
	}
	g = g[:1] // "w#2", "a self 7", "b back 9"
	if cSiloOf(g) != cSiloOf(key) {
		return grain.ID{}
	}
	return cID(g)
}

// sender checks the sender m's handler sees.
func (b *cBook) sender(c *grain.Context, m cMsg, key string) {
	got, _ := c.Sender()
	if want := cSenderOf(m.From, key); got != want {
		b.violate("%s>%s: message %d handled as from %v", m.From, key, m.ID, got)
	}
}

// received notes n, which ob received: it is a notification of the run,
// meant for ob, from the grain that told it.
func (b *cBook) received(ob *cObs, n silo.Notification) {
	m, ok := n.Msg.(cMsg)
	if !ok {
		b.violate("%s received %+v, not a message of the run", ob.key, n)
		return
	}
	b.mu.Lock()
	s := b.msgs[m.ID-1]
	b.mu.Unlock()
	want := cSenderOf(s.from, ob.key)
	switch {
	case s.key != ob.key:
		b.violate("%s received message %d, meant for %s", ob.key, m.ID, s.key)
	case n.Sender != want:
		b.violate("%s received message %d of %s from sender %v", ob.key, m.ID, s.from, n.Sender)
	case s.carry && n.Carried != any(s.root) || !s.carry && n.Carried != nil:
		b.violate("%s received message %d of %s, of step %v, carrying %v", ob.key, m.ID, s.from, s.root, n.Carried)
	}
	b.handle(m, ob.key, 0)
}

func (b *cBook) violate(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.violations = append(b.violations, fmt.Sprintf(format, args...))
}

// cRoot is the client step a message comes from: the client's own
// message, or one a grain sent in the turn of that message (a fwd). The
// client's ctx holds it as a value (cRootKey).
type cRoot struct{ client, step int }

type cRootKey struct{}

// cOrigin is what a message's sends inherit from it: whether it came
// under a short deadline, its client step, and whether the ctx it is
// sent with holds the step (cRootKey).
type cOrigin struct {
	short bool
	root  cRoot
	has   bool
}

// register gives from's next message to key its ID and N. Its handler
// is to see o's step in its ctx if the sender's ctx holds it and the
// message is an ask (run under its caller's ctx) or a propagator carries
// it (Config.Propagator).
func (b *cBook) register(from, key string, ask bool, o cOrigin, do cDo, to string) cMsg {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs = append(b.msgs, &cSent{from: from, key: key, ask: ask, short: o.short, root: o.root, carry: o.has && (ask || b.propagate)})
	b.next[from+">"+key]++
	b.seq++
	b.msgs[len(b.msgs)-1].sentAt = b.seq
	return cMsg{ID: uint64(len(b.msgs)), From: from, N: b.next[from+">"+key], Do: do, To: to}
}

func (b *cBook) sent(id uint64, err error) { b.answered(id, nil, err) }

// answered notes the ask id's reply, and its error.
func (b *cBook) answered(id uint64, reply any, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	b.msgs[id-1].sendErr, b.msgs[id-1].returned, b.msgs[id-1].back = err, true, b.seq
	b.msgs[id-1].reply = reply
}

// cEvent is a Stop, a fatal ask, a poisoning or the silo's end, which may
// explain a dead letter: its key ("" for the end) and when it began and
// ended (0: never).
type cEvent struct {
	what, key string
	begin     int64
	end       int64
}

// event notes that what began for key; the ending it returns notes its
// end.
func (b *cBook) event(what, key string) (ended func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e := &cEvent{what: what, key: key, begin: b.seq}
	b.events = append(b.events, e)
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.seq++
		e.end = b.seq
	}
}

// mark notes a moment of key's life that explains nothing, for a failure's
// account: an activation, a deactivation. b.mu held.
func (b *cBook) mark(what, key string) {
	b.seq++
	b.events = append(b.events, &cEvent{what: what, key: key, begin: b.seq, end: b.seq})
}

// explained reports whether an event of what for m's key may have made m a
// dead letter: for "stop" (a Stop, or a fatal ask's supervision stop), one
// that had not ended when m was sent — a stop draws its line under what
// was sent before it, not after (but a reentrant grain's supervision stop
// waits for its last turn to end, docs/lifecycle.md, and what was sent
// meanwhile is queued before it); for "fatal" (a quarantine), one that
// began before m's send ended — a grain's messages reach it in the order
// they were queued, whoever sent them, so one sent before the fatal ask
// is handled before it fails; for the others, the end and a poisoned
// activation, one at any time — m may still be queued.
func (b *cBook) explained(m *cSent, what string) bool {
	for _, e := range b.events {
		switch {
		case e.what == "end": // its key the silo's
			if what == "end" && e.key == cSiloOf(m.key) {
				return true
			}
		case e.key != m.key:
		case what == "stop" && (e.what == "stop" || e.what == "fatal"):
			if e.end == 0 || e.end > m.sentAt || e.what == "fatal" && cInterleaves(e.key) {
				return true
			}
		case e.what == what && (what != "fatal" || e.begin < m.back):
			return true
		}
	}
	return false
}

// handle notes m handled by key's activation inst, checking its sender's
// order: of two messages from one sender to one grain, the one whose send
// returned before the other's began is handled first. Sends that
// overlapped have no order to keep — a sender's sends are one after
// another but where an OnDeactivate the silo gave up on goes on alone
// (docs/lifecycle.md) beside the grain's next activation, which sends as
// the same grain.
func (b *cBook) handle(m cMsg, key string, inst int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.msgs[m.ID-1]
	s.handled++
	s.inst = inst
	if s.began == 0 {
		b.seq++
		s.began, s.do = b.seq, m.Do
	}
	pair := m.From + ">" + key
	if key == "e" && m.Do == cNote {
		pair += " (let in)"
	}
	if !cWorker(key) {
		for _, om := range b.handledOf[pair] {
			o := b.msgs[om.ID-1]
			// s.back, if it has returned at all, is later than o.sentAt
			// unless it returned before o was sent: o was handled already.
			if om.ID == m.ID || om.N > m.N && s.returned && s.back < o.sentAt {
				b.violations = append(b.violations, fmt.Sprintf("%s: message %d (ID %d) handled after %d (ID %d): this one ask %v, do %v, sent %d–%d, began %d, activation %d; that one ask %v, do %v, sent %d–%d, began %d, activation %d; %v",
					pair, m.N, m.ID, om.N, om.ID, s.ask, m.Do, s.sentAt, s.back, s.began, inst, o.ask, o.do, o.sentAt, o.back, o.began, o.inst, b.eventsOf(key)))
				break
			}
		}
	}
	b.handledOf[pair] = append(b.handledOf[pair], m)
}

type cGrain struct {
	b      *cBook
	key    string
	inst   int
	obj    int64       // its serial among the instances made, for a failure's account
	inTurn atomic.Bool // a turn runs (enter)
	// b.mu: the timer's state — the gen-th started, running (not stopped
	// since), its ticks so far; and whether the activation deactivated
	timerGen, timerTicks int
	timerOn, oneShot     bool
	gone                 bool
	// b.mu: the time, on the silo's clock, until which the activation
	// asked to be kept (DelayDeactivation), no later than the silo has it
	keptUntil time.Time
	subs      grain.Observers // the turns': its subscribers (cNotify)
	actCtx    context.Context // OnActivate's: whether the silo gave up on it (givenUp)
	// b.mu: a later activation began while this one was live (activated),
	// and those that did
	overlapped   bool
	overlappedBy []*cGrain
	// b.mu: a turn asked to deactivate (cLeave); a turn failed (cBoom,
	// cFatal); a message other than a goodbye was handled
	left, failed, worked bool
}

// outside waits for the goroutine that stands for the world outside the
// silo (I/O) to answer; once the run is over, not at all.
func (b *cBook) outside() error {
	done := make(chan struct{})
	select {
	case b.io <- done:
		<-done
	case <-b.ioQuit:
	}
	return nil
}

// hookIO is what a hook waits for in silo.Await: the outside world, or
// in a run whose hooks overrun, one wait in three a store that hangs past
// the hook's bound (Config.ActivationTimeout, DeactivationTimeout) — in
// turn until the hook's ctx ends, and for longer, ignoring it. The hook
// calls ended as it returns: one the silo gave up on may outlive its silo,
// and the book is read once those have ended.
func (b *cBook) hookIO(ctx context.Context, key string) (wait func() error, ended func()) {
	if !b.overrun {
		return b.outside, func() {}
	}
	b.mu.Lock()
	b.hooks++
	n := b.hooks
	// Any hook may overrun bounds this short (a goroutine not scheduled
	// for 3 ms): this may explain an activation failed.
	b.mark("overrun", key)
	if n%3 != 0 {
		b.mu.Unlock()
		return b.outside, func() {}
	}
	b.slow.Add(1)
	b.mu.Unlock()
	if n%6 == 0 { // heeding its ctx
		return func() error {
			select {
			case <-ctx.Done():
			case <-b.slowQuit:
			}
			return ctx.Err()
		}, b.slow.Done
	}
	return func() error { // ignoring it
		select {
		case <-time.After(8 * time.Millisecond):
		case <-b.slowQuit:
		}
		return nil
	}, b.slow.Done
}

// givenUp reports whether the silo gave up on the activation's OnActivate
// (Config.ActivationTimeout): its ctx ended for it.
func (g *cGrain) givenUp() bool {
	return g.actCtx != nil && errors.Is(context.Cause(g.actCtx), context.DeadlineExceeded)
}

func (g *cGrain) OnActivate(ctx context.Context, c *grain.Context) error {
	g.b.mu.Lock()
	g.b.mark(fmt.Sprintf("OnActivate of obj %d", g.obj), g.key) // what ran beside what, for a failure's account
	g.b.mu.Unlock()
	if g.b.hooksWait { // a load
		load, ended := g.b.hookIO(ctx, g.key)
		defer ended()
		if err := silo.Await(ctx, load); err != nil && !(g.b.overrun && ctx.Err() != nil) {
			g.b.violate("%s: Await in OnActivate: %v", g.key, err)
		}
	}
	if g.b.overrun && ctx.Err() != nil {
		// Given up on (or its silo closed): the activation failed, and a
		// timer started now would never fire — it is refused. (Nothing
		// else ends this ctx: not an ask's caller giving up.)
		err := c.StartTimer("late", time.Millisecond, 0, cTick{Key: g.key, Inst: g.inst, Gen: -1})
		if !errors.Is(err, grain.ErrActivation) && !errors.Is(err, grain.ErrSiloClosed) {
			g.b.violate("%s #%d: StartTimer in an OnActivate given up on: %v, want ErrActivation or ErrSiloClosed", g.key, g.inst, err)
		}
		return context.Cause(ctx)
	}
	g.b.mu.Lock()
	g.b.mark(fmt.Sprintf("loaded, obj %d, its ctx's Err %v", g.obj, ctx.Err()), g.key)
	g.b.mu.Unlock()
	g.actCtx = ctx // whose end may yet say the silo gave up on the hook
	g.foreignCall(c, "OnActivate")
	if err := g.activated(); err != nil {
		return err
	}
	if g.inst%2 == 1 {
		// A timer started as the grain activates, as one that saves
		// periodically does: a tick of one, due in 0–2 ms.
		g.startTimer(ctx, c, cMsg{Due: time.Duration(g.inst%3) * time.Millisecond}, true)
	}
	return nil
}

// laterOnes says which activations began while another was live, and how
// their OnActivate's ctx ended, if it did.
func laterOnes(gs []*cGrain) string {
	var s []string
	for _, g := range gs {
		err, cause := error(nil), error(nil)
		if g.actCtx != nil {
			err, cause = g.actCtx.Err(), context.Cause(g.actCtx)
		}
		s = append(s, fmt.Sprintf("#%d (obj %d; its OnActivate's ctx: Err %v, Cause %v)", g.inst, g.obj, err, cause))
	}
	return strings.Join(s, ", ")
}

// allGivenUp reports whether the silo gave up on every activation of gs
// as it activated.
func allGivenUp(gs []*cGrain) bool {
	for _, g := range gs {
		if !g.givenUp() {
			return false
		}
	}
	return true
}

// activated notes the activation, or fails it if the grain was poisoned.
func (g *cGrain) activated() error {
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	if g.b.poison[g.key] {
		delete(g.b.poison, g.key)
		return errRacePoison
	}
	if prev := g.b.liveG[g.key]; g.b.live[g.key] && !cWorker(g.key) && !prev.givenUp() {
		// (One whose hook returned as the silo gave up on it never was.)
		if g.b.overrun {
			// Its OnDeactivate may have been given up on before it began
			// (a goroutine not scheduled for its bound): it says so when
			// it runs (deactivating).
			prev.overlapped = true
			prev.overlappedBy = append(prev.overlappedBy, g)
		} else {
			g.b.violations = append(g.b.violations, g.key+" activated while an activation of it was live")
		}
	}
	g.b.live[g.key], g.b.liveG[g.key] = true, g
	g.b.insts[g.key]++
	g.inst = g.b.insts[g.key]
	g.b.mark(fmt.Sprintf("activate #%d obj %d", g.inst, g.obj), g.key)
	return nil
}

func (g *cGrain) OnDeactivate(ctx context.Context, c *grain.Context) error {
	worked := g.deactivating(ctx, c)
	// A timer started from OnDeactivate is refused: it would never fire
	// (were one to, tick reports it).
	if err := c.StartTimer("late", time.Millisecond, 0, cTick{Key: g.key, Inst: g.inst, Gen: -1}); !errors.Is(err, grain.ErrDeactivating) {
		g.b.violate("%s #%d: StartTimer in OnDeactivate: %v, want ErrDeactivating", g.key, g.inst, err)
	}
	if g.b.hooksWait { // a save
		save, ended := g.b.hookIO(ctx, g.key)
		defer ended()
		if err := silo.Await(ctx, save); err != nil && !(g.b.overrun && ctx.Err() != nil) {
			g.b.violate("%s #%d: Await in OnDeactivate: %v", g.key, g.inst, err)
		}
	}
	g.foreignCall(c, "OnDeactivate")
	if worked {
		g.goodbye(ctx, c)
	}
	return nil
}

// deactivating checks the deactivation and notes it, and reports whether
// the activation handled a message other than a goodbye: then it says
// goodbye (but not one woken by a goodbye, or they would go round the
// grains for ever).
func (g *cGrain) deactivating(ctx context.Context, c *grain.Context) (worked bool) {
	now := c.Now()
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	if r := c.DeactivationReason(); (r == grain.DeactivationIdle || r == grain.DeactivationMemoryPressure) && now.Before(g.keptUntil) {
		g.b.violations = append(g.b.violations, fmt.Sprintf("%s #%d deactivated (%v) %v before the time it asked to be kept until",
			g.key, g.inst, r, g.keptUntil.Sub(now)))
	}
	switch {
	case g.overlapped:
		// A later activation began while this one was live: only once
		// the silo had given up on this OnDeactivate, which ended its ctx
		// — or it only seemed to: the silo had given up on the later one
		// as it activated, and ended its ctx, which its OnActivate had
		// looked at an instant before (the owner's give-up and the end of
		// the hook's ctx are two steps; the hook may run between them).
		// That ctx has ended by now: the give-up came first, on the
		// owner that runs this OnDeactivate.
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) && !allGivenUp(g.overlappedBy) {
			g.b.violations = append(g.b.violations, fmt.Sprintf("%s #%d: a later activation began while it was live (its OnDeactivate's ctx: %v, reason %v; the later: %s; the key's events: %v)",
				g.key, g.inst, context.Cause(ctx), c.DeactivationReason(), laterOnes(g.overlappedBy), g.b.eventsOf(g.key)))
		}
	case !cWorker(g.key) && (!g.b.live[g.key] || g.b.insts[g.key] != g.inst):
		g.b.violations = append(g.b.violations, fmt.Sprintf("%s #%d deactivated while not the live activation", g.key, g.inst))
	}
	if why := g.b.deactivation(c.DeactivationReason(), g); why != "" {
		g.b.violations = append(g.b.violations, fmt.Sprintf("%s #%d deactivated (%v), but %s", g.key, g.inst, c.DeactivationReason(), why))
	}
	if !g.overlapped {
		g.b.live[g.key] = false
	}
	g.gone = true
	g.b.mark(fmt.Sprintf("deactivate #%d (%v)", g.inst, c.DeactivationReason()), g.key)
	return g.worked
}

// goodbye is what an OnDeactivate sends — as a grain that saves its state
// there tells others it has gone: a message to the next grain of cKeys,
// and a notification to its subscribers. What a Shutdown takes in its
// hooks it finishes.
func (g *cGrain) goodbye(ctx context.Context, c *grain.Context) {
	o := cOrigin{root: cRoot{-1, -1}} // no client's step
	if v, has := ctx.Value(cRootKey{}).(cRoot); has {
		o.root, o.has = v, true
	}
	to := cKeys[(strings.Index(strings.Join(cKeys, ""), g.key)+1)%len(cKeys)]
	m := g.b.register(g.sender(), to, false, o, cNote, "")
	m.Bye = true
	g.b.sent(m.ID, g.runtime(c, to).Tell(ctx, cID(to), m))
	g.subs.Notify(ctx, &cNotifier{g: g, c: c, o: o}, cNote) //nolint:errcheck // each tell's outcome is in the book
}

// deactivation says why g could not be deactivating for r, "" if it may
// be: the run made nothing happen that would give that reason. b.mu held.
func (b *cBook) deactivation(r grain.DeactivationReason, g *cGrain) string {
	began := func(what, key string) bool {
		for _, e := range b.events {
			if e.what == what && e.key == key {
				return true
			}
		}
		return false
	}
	switch r {
	case grain.DeactivationIdle:
		if !b.idle && !cWorker(g.key) { // (a worker's spare goes 2 s after its burst)
			return "the run collects no idle grains"
		}
	case grain.DeactivationRequested:
		if !g.left && !began("deactivate", g.key) {
			return "it asked for none, nor was it asked to"
		}
	case grain.DeactivationEvicted:
		if !b.capped {
			return "the run has no activation cap"
		}
	case grain.DeactivationMemoryPressure:
		if !b.short {
			return "the run's memory is never short"
		}
	case grain.DeactivationStopped:
		if !began("stop", g.key) {
			return "no Stop of it began"
		}
	case grain.DeactivationShutdown:
		if !began("end", cSiloOf(g.key)) {
			return "its silo's end had not begun"
		}
	case grain.DeactivationFailed:
		if !g.failed {
			return "none of its turns failed"
		}
	default:
		return "no such reason is meant for OnDeactivate"
	}
	return ""
}

// tick checks a timer's tick as its turn runs: it is the activation's own,
// of the timer it runs now — none after StopTimer, or a start that
// replaced it, not even one queued before (Context.StartTimer) — one at
// most of a timer of one tick, and not after the activation deactivated.
func (g *cGrain) tick(t cTick) {
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	g.b.ticks++
	switch {
	case t.Inst != g.inst:
		g.b.violations = append(g.b.violations, fmt.Sprintf("%s: a tick of activation %d ran in %d", g.key, t.Inst, g.inst))
	case g.gone:
		g.b.violations = append(g.b.violations, fmt.Sprintf("%s #%d: a tick ran after its OnDeactivate", g.key, g.inst))
	case !g.timerOn || t.Gen != g.timerGen:
		g.b.violations = append(g.b.violations, fmt.Sprintf("%s #%d: a tick of timer %d ran, its timer now %d, running %v", g.key, g.inst, t.Gen, g.timerGen, g.timerOn))
	}
	g.timerTicks++
	if g.oneShot && g.timerTicks > 1 {
		g.b.violations = append(g.b.violations, fmt.Sprintf("%s #%d: a timer of one tick ticked %d times", g.key, g.inst, g.timerTicks))
	}
}

// startTimer starts the activation's timer for m, replacing the one it
// had, from a turn with ctx (from OnActivate: hook).
func (g *cGrain) startTimer(ctx context.Context, c *grain.Context, m cMsg, hook bool) {
	g.b.mu.Lock()
	wasOn, wasOneShot, wasTicks := g.timerOn, g.oneShot, g.timerTicks // restored if the start is refused
	g.timerGen++
	g.timerOn, g.oneShot, g.timerTicks = true, m.Period == 0, 0
	t := cTick{Key: g.key, Inst: g.inst, Gen: g.timerGen}
	g.b.mu.Unlock()
	err := c.StartTimer("t", m.Due, m.Period, t)
	if err == nil {
		return
	}
	// Refused as it would never fire: its silo stops, or the silo gave up
	// on the OnActivate that starts it. Either ends the turn's ctx. A
	// timer it was to replace is not replaced: a tick of it already on
	// its way may still run as the silo closes, and the book says so
	// again — unless another turn started one since. (No tick runs
	// between the two: the turn holds its grain, in no call.)
	g.b.mu.Lock()
	if g.timerGen == t.Gen {
		g.timerGen--
		g.timerOn, g.oneShot, g.timerTicks = wasOn, wasOneShot, wasTicks
	}
	g.b.mu.Unlock()
	if errors.Is(err, grain.ErrSiloClosed) || hook && g.b.overrun && errors.Is(err, grain.ErrActivation) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	g.b.violate("%s #%d: StartTimer: %v", g.key, g.inst, err)
}

// keep asks to keep the activation for d (d <= 0: not any more), and
// notes until when, read before the silo reads it: no later than it has
// it. A shorter d than asked before does not shorten the keep-alive.
func (g *cGrain) keep(c *grain.Context, d time.Duration) {
	now := c.Now()
	c.DelayDeactivation(d)
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	if d <= 0 {
		g.keptUntil = time.Time{}
	} else if until := now.Add(d); until.After(g.keptUntil) {
		g.keptUntil = until
	}
}

func (g *cGrain) stopTimer(c *grain.Context) {
	g.b.mu.Lock()
	g.timerOn = false
	g.b.mu.Unlock()
	c.StopTimer("t")
}

// sender is the grain as a sender: a stateless worker's activations are
// each one of their own.
func (g *cGrain) sender() string {
	if cWorker(g.key) {
		return fmt.Sprintf("g:%s#%d", g.key, g.inst)
	}
	return "g:" + g.key
}

// enter notes that a turn of the activation runs; a turn waiting in a
// call does not (leave): only then may another — a reentrant grain's, or a
// call back on the waiting turn's chain — run.
func (g *cGrain) enter() {
	if g.inTurn.Swap(true) {
		g.b.violate("%s #%d: two turns running at once", g.key, g.inst)
	}
}

func (g *cGrain) leave() { g.inTurn.Store(false) }

// cForeign is a call a checked silo must refuse: made from a turn with a
// ctx that is not the turn's.
type cForeign struct{}

// foreignCall calls the grain itself with context.Background(), as a
// handler that forgets its ctx does: with Config.CheckContexts, that is
// refused at once (ErrForeignContext; ErrSiloClosed as its silo ends),
// and nothing is sent. (Unchecked it would wait for its timeout: a cycle
// the silo cannot see.) A bound on it in case it is not refused.
func (g *cGrain) foreignCall(c *grain.Context, where string) {
	if !g.b.checked {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Silo().Ask(ctx, c.ID(), cForeign{})
	if !errors.Is(err, grain.ErrForeignContext) && !errors.Is(err, grain.ErrSiloClosed) {
		g.b.violate("%s #%d: a call with a foreign ctx from %s: %v, want ErrForeignContext", g.key, g.inst, where, err)
	}
}

// runtime is what the turn sends key a message through: its own silo's
// view for the turn (grain.Context.Silo: through the send filters), or
// the other silo.
func (g *cGrain) runtime(c *grain.Context, key string) grain.Runtime {
	if cSiloOf(key) == cSiloOf(g.key) {
		return c.Silo()
	}
	return g.b.silos[cSiloOf(key)]
}

// ask asks key m from the turn, which waits meanwhile, and notes the
// answer.
func (g *cGrain) ask(ctx context.Context, c *grain.Context, key string, m cMsg) {
	g.leave()
	defer g.enter()
	reply, err := g.runtime(c, key).Ask(ctx, cID(key), m)
	g.b.answered(m.ID, reply, err)
}

func (g *cGrain) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	if t, ok := msg.(cTick); ok {
		g.enter()
		defer g.leave()
		if g.givenUp() {
			g.b.violate("%s #%d, given up on as it activated, ran a tick", g.key, g.inst)
		}
		g.tick(t)
		if id, ok := c.Sender(); ok {
			g.b.violate("%s #%d: a tick from %v", g.key, g.inst, id)
		}
		return nil, nil
	}
	if end, ok := msg.(cEndFrom); ok {
		g.enter()
		defer g.leave()
		s := g.b.silos[cSiloOf(g.key)]
		if end.Close {
			if err := s.Close(); err != nil {
				g.b.violate("%s #%d: Close from its turn: %v", g.key, g.inst, err)
			}
		} else if err := s.Shutdown(ctx); err != nil && !errors.Is(err, silo.ErrShutdownFromTurn) {
			g.b.violate("%s #%d: Shutdown from its turn: %v", g.key, g.inst, err)
		}
		return g.inst, nil
	}
	if _, ok := msg.(cForeign); ok {
		g.b.violate("%s #%d: a call with a foreign ctx was delivered", g.key, g.inst)
		return nil, nil
	}
	m := msg.(cMsg)
	g.enter()
	defer g.leave()
	if g.givenUp() {
		g.b.violate("%s #%d, given up on as it activated, handled message %d", g.key, g.inst, m.ID)
	}
	g.b.handle(m, g.key, g.inst)
	if !m.Bye {
		g.b.mu.Lock()
		g.worked = true
		g.b.mu.Unlock()
	}
	g.b.sender(c, m, g.key)
	if m.ID%5 == 0 {
		g.foreignCall(c, "a turn")
	}
	o := g.b.origin(ctx, m)
	switch m.Do {
	case cFwdTell, cFwdAsk:
		fm := g.b.register(g.sender(), m.To, m.Do == cFwdAsk, o, cNote, "")
		if m.Do == cFwdAsk {
			g.ask(ctx, c, m.To, fm)
		} else {
			g.b.sent(fm.ID, g.runtime(c, m.To).Tell(ctx, cID(m.To), fm))
		}
	case cBounce:
		from := g.sender()
		if m.To == g.key { // a call back into itself: a sender of its own, as cBack's
			from = fmt.Sprintf("g:%s self %d", g.key, m.ID)
		}
		fm := g.b.register(from, m.To, true, o, cBack, g.key)
		g.ask(silo.AllowCallChainReentrancy(ctx), c, m.To, fm)
	case cBack:
		// A sender of its own: a call back runs on the turn that waits
		// for it, ahead of what waits in the mailbox — the chain's grain's
		// other messages among them.
		fm := g.b.register(fmt.Sprintf("g:%s back %d", g.key, m.ID), m.To, true, o, cNote, "")
		g.ask(ctx, c, m.To, fm)
	case cBoom:
		g.b.mu.Lock()
		g.failed = true
		g.b.failures[cSiloOf(g.key)][0]++
		g.b.mark(fmt.Sprintf("boom #%d", g.inst), g.key)
		g.b.mu.Unlock()
		panic("clients model: boom")
	case cFatal:
		g.b.mu.Lock()
		g.failed = true
		g.b.failures[cSiloOf(g.key)][1]++
		g.b.mark(fmt.Sprintf("fatal #%d", g.inst), g.key)
		g.b.mu.Unlock()
		return nil, errCFatal
	case cOops:
		return nil, errCOops
	case cLeave:
		g.b.mu.Lock()
		g.left = true
		g.b.mark(fmt.Sprintf("leave #%d", g.inst), g.key)
		g.b.mu.Unlock()
		c.DeactivateOnIdle()
	case cTimer:
		g.startTimer(ctx, c, m, false)
	case cUntimer:
		g.stopTimer(c)
	case cKeep:
		g.keep(c, m.Due)
	case cNotify:
		g.notify(ctx, c, m, o)
	case cStopTo, cDeactTo:
		// As an admin grain does: Stop and Deactivate return at once, the
		// grain's own too (its turn finishes first).
		s, what := g.b.silos[cSiloOf(m.To)], "stop"
		if m.Do == cDeactTo {
			what = "deactivate"
		}
		ended := g.b.event(what, m.To)
		var err error
		if m.Do == cStopTo {
			err = s.Stop(ctx, cID(m.To))
		} else {
			err = s.Deactivate(ctx, cID(m.To))
		}
		ended()
		if err != nil && !errors.Is(err, grain.ErrSiloClosed) && ctx.Err() == nil {
			g.b.violate("%s #%d: %s %s from its turn: %v", g.key, g.inst, what, m.To, err)
		}
	case cAwait:
		// As across a call, a grain that interleaves lets others in
		// meanwhile; what the turn sends after comes after what they sent.
		g.leave()
		err := silo.Await(ctx, g.b.outside)
		g.enter()
		if err != nil {
			g.b.violate("%s #%d: Await: %v", g.key, g.inst, err)
		}
		fm := g.b.register(g.sender(), m.To, false, o, cNote, "")
		g.b.sent(fm.ID, g.runtime(c, m.To).Tell(ctx, cID(m.To), fm))
	}
	return g.inst, nil
}

// notify subscribes m's observer, if it has one, and notifies every
// subscriber, each with a message of its own (cNotifier), checking what
// Notify says of it: a closed observer dropped from the list, the other
// refusals counted.
func (g *cGrain) notify(ctx context.Context, c *grain.Context, m cMsg, o cOrigin) {
	if !m.Obs.IsZero() {
		if _, err := g.subs.Subscribe(m.Obs); err != nil {
			g.b.violate("%s #%d: Subscribe(%v): %v", g.key, g.inst, m.Obs, err)
		}
	}
	t := &cNotifier{g: g, c: c, o: o}
	err := g.subs.Notify(ctx, t, cNote)
	var nerr *grain.NotifyError
	switch {
	case err == nil && t.failed > 0, err != nil && !errors.As(err, &nerr):
		g.b.violate("%s #%d: Notify: %v, with %d tells refused", g.key, g.inst, err, t.failed)
	case err != nil && nerr.Failed != t.failed:
		g.b.violate("%s #%d: Notify counts %d refused, its tells were %d", g.key, g.inst, nerr.Failed, t.failed)
	}
	for id := range g.subs.All() {
		if t.closed[id] {
			g.b.violate("%s #%d: Notify kept %v, found closed", g.key, g.inst, id)
		}
	}
}

// cNotifier is the Teller a grain's Notify tells through: each
// subscriber gets a message of its own, noted in the book, through the
// turn's view of the observer's silo, or the other silo.
type cNotifier struct {
	g      *cGrain
	c      *grain.Context
	o      cOrigin
	failed int               // tells refused, but as closed
	closed map[grain.ID]bool // refused as closed
}

func (t *cNotifier) Tell(ctx context.Context, id grain.ID, _ any) error {
	t.g.b.mu.Lock()
	key := t.g.b.obsKey[id]
	t.g.b.mu.Unlock()
	if key == "" {
		t.g.b.violate("%s #%d: Notify told %v, no observer of the run", t.g.key, t.g.inst, id)
	}
	m := t.g.b.register(t.g.sender(), key, false, t.o, cNote, "")
	err := t.g.runtime(t.c, key).Tell(ctx, id, m)
	t.g.b.sent(m.ID, err)
	switch {
	case errors.Is(err, grain.ErrObserverClosed):
		if t.closed == nil {
			t.closed = map[grain.ID]bool{}
		}
		t.closed[id] = true
	case err != nil:
		t.failed++
	}
	return err
}

// origin is what m's turn's sends inherit from it, checking that its
// handler's ctx holds m's client step if it is to (cSent.carry), and no
// step if not: a tell's handler sees none of its sender's values but
// those a propagator carries.
func (b *cBook) origin(ctx context.Context, m cMsg) cOrigin {
	v, has := ctx.Value(cRootKey{}).(cRoot)
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.msgs[m.ID-1]
	if s.carry && v != s.root || !s.carry && has {
		b.violations = append(b.violations, fmt.Sprintf("%s>%s: message %d (ask %v) of step %v handled under a ctx holding %v (%v)",
			s.from, s.key, m.ID, s.ask, s.root, v, has))
	}
	return cOrigin{short: s.short, root: s.root, has: has}
}

// cLine is a client's Stop or Deactivate: step of its script.
type cLine struct {
	op   string // "stop", "deactivate"
	key  string
	step int
}

// cEnd is how a silo of the run ends: with a Shutdown or a Close (how),
// once every client has finished, or at client by's step at (early).
type cEnd struct {
	silo, how string
	by, at    int
}

func (e cEnd) String() string { return fmt.Sprintf("%s: %s by c%d at %d", e.silo, e.how, e.by, e.at) }

// cRun is what else a run drew: whether the plain kind's ticks keep its
// grains alive (WithTimerKeepAlive), whether OnActivate and OnDeactivate
// wait for something outside (a load and a save: silo.Await) — and now and
// then for longer than their bounds (overrun) — and the
// size of the observers' buffers.
type cRun struct {
	keepAlive, hooksWait, overrun, timed, checked bool
	obsBuf                                        int
}

func runClients(rt *rapid.T, cfg silo.Config, backlog []silo.KindOption, r cRun, scripts [][]cOp, ends [2]cEnd) {
	clk := cfg.Clock.(*jumpClock)
	b := &cBook{next: map[string]int{}, handledOf: map[string][]cMsg{}, insts: map[string]int{}, live: map[string]bool{}, poison: map[string]bool{},
		overload: len(backlog) > 0 || cfg.QueueCapacity > 0, io: make(chan chan struct{}),
		graceful: map[string]bool{}, silos: map[string]*silo.Silo{}, propagate: cfg.Propagator != nil,
		idle: cfg.IdleTimeout > 0, capped: cfg.MaxActivations > 0, short: cfg.MemoryLimit > 0, depthCapped: cfg.MaxCallDepth > 0,
		obsKey: map[grain.ID]string{}, obsID: map[string]grain.ID{}, obsBuf: r.obsBuf, ending: map[string]bool{},
		hooksWait: r.hooksWait, overrun: r.overrun, timed: r.timed, checked: r.checked, slowQuit: make(chan struct{}), liveG: map[string]*cGrain{},
		ioQuit: make(chan struct{}), failures: map[string]*[2]int{"A": {}, "B": {}}}
	cfg.Logger = slog.New(cLogHandler{b}) // the silo's lines about a grain join its events
	ioDone := make(chan struct{})
	go func() { // the outside world an Await waits on
		defer close(ioDone)
		for {
			select {
			case done := <-b.io:
				close(done)
			case <-b.ioQuit:
				return
			}
		}
	}()
	defer func() {
		close(b.ioQuit) // after the silos have stopped
		<-ioDone
	}()
	sup := activation.Supervision{MaxRestarts: 1 << 20, Window: time.Nanosecond, MinBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond, Quarantine: 3 * time.Millisecond,
		Decider: activation.DeciderFunc(func(id grain.ID, err error) activation.Directive {
			if errors.Is(err, errCFatal) {
				return activation.Stop
			}
			if errors.Is(err, errCOops) {
				return activation.Resume
			}
			return activation.DefaultDecider(id, err)
		})}
	letIn := silo.WithMayInterleave(func(msg any) bool {
		if _, tick := msg.(cTick); tick {
			return true // its timer's ticks too
		}
		m, ok := msg.(cMsg)
		return ok && m.Do == cNote
	})
	kinds := map[string][]silo.KindOption{
		"cm": nil, "cre": {silo.WithReentrant()}, "cmi": {letIn}, "csw": {silo.WithStatelessWorker(2)},
		"csr": {silo.WithStatelessWorker(2), silo.WithReentrant()},
	}
	var dead []silo.DeadLetter
	var deadMu sync.Mutex
	var collecting sync.WaitGroup
	var subs []*silo.DeadLetters
	seen := map[string]uint64{} // deadMu: the dead letters each silo's subscription saw
	for _, name := range []string{"A", "B"} {
		s, err := silo.New(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		b.silos[name] = s
		for kind, opt := range kinds {
			if name == "B" && kind != "cm" {
				continue // the second silo's grain is of the plain kind
			}
			opts := append([]silo.KindOption{silo.WithSupervision(sup)}, backlog...)
			opts = append(opts, opt...)
			if kind == "cm" && r.keepAlive {
				opts = append(opts, silo.WithTimerKeepAlive())
			}
			if err := silo.Register(s, kind, func(id grain.ID) *cGrain { return &cGrain{b: b, key: id.Key(), obj: b.objs.Add(1)} }, opts...); err != nil {
				rt.Fatal(err)
			}
		}
		dl := s.SubscribeDeadLetters(silo.MaxDeadLetterBuffer)
		subs = append(subs, dl)
		collecting.Go(func() {
			for d := range dl.C { // closed once the silo has stopped
				deadMu.Lock()
				dead = append(dead, d)
				seen[name]++
				deadMu.Unlock()
			}
		})
	}
	for _, name := range []string{"A", "B"} {
		if err := b.silos[name].Start(); err != nil {
			rt.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finish := func(e cEnd) {
		b.endMu.Lock() // after any Close of an observer under way (cBook.endMu)
		b.ending[e.silo] = true
		b.endMu.Unlock()
		defer b.event("end", e.silo)()
		s := b.silos[e.silo]
		if strings.HasPrefix(e.how, "close") {
			if err := s.Close(); err != nil {
				b.violate("%s: Close: %v", e.silo, err)
			}
			return
		}
		if fromTurn := strings.HasPrefix(e.how, "shutdown from a turn"); fromTurn || strings.HasPrefix(e.how, "close from a turn") {
			// An admin grain's turn shuts its silo down, or closes it:
			// Shutdown begins it and returns ErrShutdownFromTurn, Close
			// returns once the partitions have stopped, waiting for no
			// turn; the silo is waited for on Done. If the grain cannot
			// take the message (stopped, overloaded), it is ended from
			// outside.
			key := map[string]string{"A": "a", "B": "x"}[e.silo]
			actx, cancel := context.WithTimeout(ctx, cAskBound)
			_, err := s.Ask(actx, cID(key), cEndFrom{Close: !fromTurn})
			cancel()
			if err != nil {
				sctx, cancel := context.WithTimeout(ctx, cAskBound)
				defer cancel()
				if serr := s.Shutdown(sctx); serr != nil {
					b.violate("%s: Shutdown (from outside, the turn's message refused: %v): %v", e.silo, err, serr)
				}
			}
			select {
			case <-s.Done():
			case <-time.After(cAskBound):
				b.violate("%s: shut down from a turn, not stopped after %v", e.silo, cAskBound)
			}
			if !fromTurn {
				// As main does once its admin grain has closed the silo:
				// Close waits for the turns the grain's Close did not.
				if err := s.Close(); err != nil {
					b.violate("%s: Close after a grain's Close: %v", e.silo, err)
				}
			}
			return
		}
		if strings.HasPrefix(e.how, "shutdown twice") {
			// Two Shutdowns at once — a signal handler's and a deferred
			// one: each returns once the silo has stopped.
			sctx, cancel := context.WithTimeout(ctx, cAskBound)
			defer cancel()
			var twice sync.WaitGroup
			for range 2 {
				twice.Go(func() {
					if err := s.Shutdown(sctx); err != nil {
						b.violate("%s: one of two Shutdowns: %v", e.silo, err)
					}
					select {
					case <-s.Done():
					default:
						b.violate("%s: a Shutdown returned before its silo stopped", e.silo)
					}
				})
			}
			twice.Wait()
			return
		}
		if strings.HasPrefix(e.how, "shutdown cut short") {
			// A Close while a Shutdown runs — a second signal, a
			// deferred Close — ends it as Close does; the Shutdown
			// returns once the silo has stopped.
			sctx, cancel := context.WithTimeout(ctx, cAskBound)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- s.Shutdown(sctx) }()
			runtime.Gosched()
			if err := s.Close(); err != nil {
				b.violate("%s: Close during a Shutdown: %v", e.silo, err)
			}
			if err := <-shut; err != nil {
				b.violate("%s: a Shutdown a Close cut short: %v", e.silo, err)
			}
			return
		}
		bound := cAskBound
		if strings.HasPrefix(e.how, "hasty") {
			// A Shutdown whose ctx ends before its work does, most
			// often: the silo closes as Close does, wherever it stood.
			bound = time.Duration((e.at+1)%3) * time.Millisecond // 0–2 ms
		}
		sctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		if err := s.Shutdown(sctx); err != nil && !(bound < cAskBound && errors.Is(err, context.DeadlineExceeded)) {
			b.violate("%s: Shutdown: %v", e.silo, err)
		}
	}
	for _, e := range ends {
		b.graceful[e.silo] = strings.HasPrefix(e.how, "shutdown") && !strings.HasPrefix(e.how, "shutdown cut short")
	}
	lines := make([][]cLine, len(scripts))
	var wg sync.WaitGroup
	for c, script := range scripts {
		wg.Go(func() {
			cl := &cClient{clk: clk, b: b, c: c, obs: b.newObserver([]string{"A", "B"}[c%2])}
			for i, o := range script {
				for _, e := range ends {
					if c == e.by && i == e.at {
						finish(e)
					}
				}
				cl.do(ctx, o, i)
			}
			lines[c] = cl.lines
		})
	}
	wg.Wait()
	for _, e := range ends {
		if e.at < 0 || e.at >= len(scripts[e.by]) {
			finish(e)
		}
	}
	collecting.Wait()
	// The hooks the silos gave up on end too, before the book is read.
	close(b.slowQuit)
	b.slow.Wait()
	// Both silos have stopped: none of their timers is left set — a
	// grain's timer, a restart's backoff, an OnDeactivate's give-up, the
	// idle tick — but those that fired as they stopped, whose functions
	// may not have begun yet: given a moment.
	for bound := time.Now().Add(time.Second); clk.armed.Load() != 0 && time.Now().Before(bound); {
		runtime.Gosched()
	}
	if n := clk.armed.Load(); n != 0 {
		b.violate("%d clock timers left set by the stopped silos", n)
	}
	// What the observers hold once their silos have stopped is still
	// theirs to read; then each is closed.
	for _, ob := range b.observers {
		rctx, cancel := context.WithTimeout(ctx, cAskBound)
		for {
			n, err := ob.o.Receive(rctx)
			if err != nil {
				if !errors.Is(err, grain.ErrObserverClosed) {
					b.violate("%s, its silo stopped: Receive: %v", ob.key, err)
				}
				break
			}
			b.received(ob, n)
		}
		cancel()
	}
	for _, dl := range subs {
		if n := dl.Dropped(); n > 0 {
			rt.Fatalf("%d dead letters dropped by the subscription: the run cannot account for them", n)
		}
	}
	var leftover []string
	for name, s := range b.silos {
		// Every dead letter the silo counts, its subscriber saw: none
		// counted unseen (a refusal after the silo stopped was).
		var counted uint64
		for _, n := range s.Stats().DeadLetters {
			counted += n
		}
		if counted != seen[name] {
			rt.Fatalf("%s: Stats counts %d dead letters, its subscription saw %d", name, counted, seen[name])
		}
		// Stopped, it holds nothing; and it counts a failure its
		// supervision carried out once at most (not one whose grain was
		// going anyway: a Stop, a shutdown).
		st := s.Stats()
		for kind, n := range st.Activations {
			if n != 0 {
				rt.Fatalf("%s, stopped: %d activations of %s", name, n, kind)
			}
		}
		if slices.ContainsFunc(st.QueueDepth, func(n int) bool { return n != 0 }) || slices.ContainsFunc(st.Backlog, func(n int) bool { return n != 0 }) {
			leftover = append(leftover, fmt.Sprintf("%s, stopped: queues %v, backlogs %v", name, st.QueueDepth, st.Backlog))
		}
		if f := b.failures[name]; st.Restarts > uint64(f[0]) || st.Stops > uint64(f[1]) {
			rt.Fatalf("%s: %d restarts and %d stops counted, for %d panics and %d fatal errors", name, st.Restarts, st.Stops, f[0], f[1])
		}
	}
	// Every send has returned, its silo stopped — a turn's among them,
	// told by its ended ctx — but for those a moment from returning: given
	// one. Else what holds them is printed.
	// So is every tell taken handled or a dead letter by then — but for
	// those a silo's stop did not wait for: one whose Shutdown's ctx had
	// ended (hasty) returns without waiting for the turns in progress,
	// the first message of an activation whose hook has returned among
	// them, which runs after.
	deadIDs := map[uint64]bool{}
	for _, d := range dead {
		if m, ok := d.Msg.(cMsg); ok {
			deadIDs[m.ID] = true
		}
	}
	var held string
	for bound := time.Now().Add(2 * time.Second); ; runtime.Gosched() {
		if !b.sendsOut() && !b.outcomesDue(deadIDs) {
			break
		}
		if time.Now().After(bound) {
			buf := make([]byte, 1<<20)
			held = "\nsends still out, or tells neither handled nor dead; the goroutines:\n" + string(buf[:runtime.Stack(buf, true)])
			break
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	fail := func(format string, args ...any) {
		var sb strings.Builder
		for c, script := range scripts {
			fmt.Fprintf(&sb, "\nc%d: %v", c, script)
		}
		rt.Fatalf(format+"\nends %v; the scripts:%s", append(args, ends, sb.String())...)
	}
	for _, d := range dead {
		if _, ok := d.Msg.(cEndFrom); ok {
			continue // the end's own: then the end was called from outside
		}
		if t, ok := d.Msg.(cTick); ok { // nobody sent it (docs/calls.md, "Timers")
			fail("a tick of %s #%d a dead letter (%v)", t.Key, t.Inst, d.Reason)
		}
		m, ok := d.Msg.(cMsg)
		if !ok {
			fail("a dead letter not of the test: %+v", d)
		}
		if key := b.msgs[m.ID-1].key; d.Target != cID(key) && d.Target != b.obsID[key] {
			fail("message %d to %s a dead letter for %v", m.ID, key, d.Target)
		}
		b.msgs[m.ID-1].dead = append(b.msgs[m.ID-1].dead, d.Reason)
	}
	if len(b.violations) > 0 {
		fail("%s", strings.Join(b.violations, "\n"))
	}
	for i, m := range b.msgs {
		if err := b.account(m); err != nil {
			fail("message %d, %s>%s (ask %v, short %v): handled %d times (by #%d), dead letters %v, send error %v: %v%s",
				i+1, m.from, m.key, m.ask, m.short, m.handled, m.inst, m.dead, m.sendErr, err, held)
		}
	}
	for c, ls := range lines {
		if err := b.lines(c, ls); err != nil {
			fail("c%d: %v", c, err)
		}
	}
	if err := b.crossOrder(); err != nil {
		fail("%v", err)
	}
	if len(leftover) > 0 {
		fail("%v", leftover)
	}
}

// crossOrder checks each grain's order whoever sent its messages: of two
// messages to a grain that keeps order, each handled once and no dead
// letter, the one whose send returned before the other's began has its
// turn begin first — a grain's messages reach it in the order they were
// pushed (docs/architecture.md, "Order"). Left out is what a grain lets
// in ahead of its mailbox by design: a call on a chain that lets calls
// back in (cOnChain), and
// at "e" its predicate's notes against the rest (each stream keeps its
// own order); and a stateless worker's and an observer's.
func (b *cBook) crossOrder() error {
	type stream struct {
		key   string
		taken bool
	}
	by := map[stream][]*cSent{}
	for _, m := range b.msgs {
		if cWorker(m.key) || strings.HasPrefix(m.key, "o") || m.handled != 1 || len(m.dead) > 0 || !m.returned || cOnChain(m) {
			continue
		}
		k := stream{m.key, m.key == "e" && m.do == cNote}
		by[k] = append(by[k], m)
	}
	for k, ms := range by {
		// From the last turn begun back: one whose send began after that
		// of one begun later had returned was overtaken.
		slices.SortFunc(ms, func(x, y *cSent) int { return cmp.Compare(y.began, x.began) })
		var later *cSent // of those begun later, the one whose send returned first
		for _, m := range ms {
			if later != nil && later.back < m.sentAt {
				return fmt.Errorf("%s%s: %s's message (ask %v, sent %d–%d) began at %d, before %s's (ask %v, sent %d–%d, began %d), whose send had returned before its own began; %v",
					k.key, map[bool]string{true: " (let in)"}[k.taken], m.from, m.ask, m.sentAt, m.back, m.began,
					later.from, later.ask, later.sentAt, later.back, later.began, b.eventsOf(k.key))
			}
			if later == nil || m.back < later.back {
				later = m
			}
		}
	}
	return nil
}

// cOnChain reports whether m may be a call back on a waiting turn's
// chain, let in ahead of its grain's mailbox: a grain's ask of itself
// (its asking turn waits for it: a cFwdAsk to itself), a cBounce's call,
// made on a chain that allows it (its target may be waiting up the
// chain), a call back into the bouncing grain itself ("g:a self 7") and
// the call back a cBack's turn makes ("g:b back 31").
func cOnChain(m *cSent) bool {
	return m.ask && m.from == "g:"+m.key || m.do == cBack || strings.Contains(m.from, " self ") || strings.Contains(m.from, " back ")
}

// account checks what became of one message against what may.
func (b *cBook) account(m *cSent) error {
	if !m.returned {
		return errors.New("its send never returned")
	}
	n := m.handled + len(m.dead)
	switch {
	case n > 1:
		return errors.New("more than one outcome")
	case errors.Is(m.sendErr, grain.ErrOverloaded):
		// Refused for a full backlog or queue, or an observer's full
		// buffer: a dead letter too.
		if !b.overload && !isObs(m.key) || m.handled != 0 || len(m.dead) != 1 || m.dead[0] != grain.ReasonOverload {
			return fmt.Errorf("refused as overloaded, but not one overload dead letter (sent %d–%d; %v)", m.sentAt, m.back, b.eventsOf(m.key))
		}
		return nil
	case errors.Is(m.sendErr, grain.ErrObserverClosed):
		// Refused by an observer its client had begun to close: a dead
		// letter too.
		if m.handled != 0 || len(m.dead) != 1 || m.dead[0] != grain.ReasonObserverClosed || !b.closedBefore(m.key, m.back) {
			return fmt.Errorf("refused as sent to a closed observer, but not one such dead letter, or no Close before (sent %d–%d; %v)", m.sentAt, m.back, b.eventsOf(m.key))
		}
		return nil
	case !m.ask && m.sendErr != nil && n != 0:
		return errors.New("a tell refused, but handled or a dead letter")
	case !m.ask && m.sendErr == nil && n != 1:
		return errors.New("a tell sent, but neither handled nor a dead letter")
	case m.ask && m.sendErr == nil && m.handled != 1:
		return errors.New("an ask answered, but not handled")
	case m.ask && m.sendErr == nil && m.reply != any(m.inst):
		return fmt.Errorf("an ask answered %v, though activation %d handled it: another's reply", m.reply, m.inst)
	case errors.Is(m.sendErr, grain.ErrCallTooDeep) && (!b.depthCapped || !strings.HasPrefix(m.from, "g:") || n != 0):
		return errors.New("refused as too deep a call, but the run caps no depth, or not a turn's call, or handled or a dead letter")
	case m.ask && m.sendErr != nil && n == 0 && !m.short && !errors.Is(m.sendErr, grain.ErrSiloClosed) && !errors.Is(m.sendErr, grain.ErrCallCycle) &&
		!errors.Is(m.sendErr, grain.ErrCallTooDeep) &&
		!(strings.HasPrefix(m.from, "g:") && errors.Is(m.sendErr, context.Canceled) && b.explained(m, "end")):
		// (A turn's ctx ends when the silo closes: an ask from it then
		// sends nothing.)
		return errors.New("an ask failed, neither handled nor a dead letter, for no reason that keeps it from being sent")
	case m.ask && errors.Is(m.sendErr, context.DeadlineExceeded) && !m.short && !errors.Is(m.sendErr, grain.ErrActivation):
		// (An activation given up on fails with a deadline's cause.)
		return fmt.Errorf("an ask waited %v", cAskBound)
	}
	for _, r := range m.dead {
		var why string
		switch r {
		case grain.ReasonStopped:
			why = "stop"
		case grain.ReasonQuarantined:
			why = "fatal"
		case grain.ReasonActivationFailed:
			why = "poison"
			if b.explained(m, "overrun") {
				continue
			}
		case grain.ReasonShutdown:
			if b.graceful[cSiloOf(m.key)] {
				return errors.New("a shutdown dead letter in a graceful Shutdown: what was taken is to finish")
			}
			why = "end"
		case grain.ReasonOverload:
			if b.overload || isObs(m.key) {
				continue
			}
			return errors.New("an overload dead letter with room to spare")
		case grain.ReasonObserverClosed:
			// What an observer held unread as its client closed it.
			if !isObs(m.key) || !b.closedBefore(m.key, 1<<62) {
				return errors.New("an observer-closed dead letter, but no Close of it")
			}
			continue
		case grain.ReasonExpired, grain.ReasonDeadlock:
			if m.ask {
				continue
			}
			return fmt.Errorf("a tell dead as %v", r)
		default:
			return fmt.Errorf("a dead letter of reason %v", r)
		}
		if !b.explained(m, why) {
			return fmt.Errorf("dead as %v (sent at %d–%d), but no %s that could have made it one: %v", r, m.sentAt, m.back, why, b.eventsOf(m.key))
		}
	}
	return nil
}

// closedBefore reports whether a Close of the observer key began before
// the book's count at.
func (b *cBook) closedBefore(key string, at int64) bool {
	for _, e := range b.events {
		if e.what == "oclose" && e.key == key && e.begin < at {
			return true
		}
	}
	return false
}

func (b *cBook) eventsOf(key string) []string {
	var s []string
	for _, e := range b.events {
		if e.key == key || e.what == "end" && e.key == cSiloOf(key) {
			s = append(s, fmt.Sprintf("%s %d–%d", e.what, e.begin, e.end))
		}
	}
	return s
}

// lines checks the lines client c's own Stops and Deactivates draw among
// what it sent, itself or through a grain's turn: after a Stop, what it
// sends a key is handled by a later activation than anything it sent the
// key before; after a Deactivate of a key of a kind that does not
// interleave, by a later one than the one that answered its last ask
// before.
func (b *cBook) lines(c int, ls []cLine) error {
	for _, l := range ls {
		if cWorker(l.key) {
			continue // several activations live at once: the line holds for each, not between them
		}
		before, answered := 0, 0
		var byBefore, byAnswered int // the messages that set them
		for id, m := range b.msgs {
			if m.root.client == c && m.root.step < l.step && m.key == l.key && m.handled > 0 {
				if m.inst > before {
					before, byBefore = m.inst, id
				}
				if m.ask && m.sendErr == nil && m.inst > answered {
					answered, byAnswered = m.inst, id
				}
			}
		}
		floor, by := before, byBefore
		if l.op == "deactivate" {
			if cInterleaves(l.key) {
				continue // a busy grain that interleaves lets messages in until its last turn ends
			}
			floor, by = answered, byAnswered
		}
		for id, m := range b.msgs {
			if m.root.client == c && m.root.step > l.step && m.key == l.key && m.handled > 0 && m.inst <= floor {
				f := b.msgs[by]
				return fmt.Errorf("message %d, %s>%s of its step %d (sent %d–%d), after its %s of %s at step %d, handled by activation %d; "+
					"want later than %d, which handled message %d, %s>%s of step %d (ask %v, sent %d–%d, %v); %v",
					id+1, m.from, m.key, m.root.step, m.sentAt, m.back, l.op, l.key, l.step, m.inst,
					floor, by+1, f.from, f.key, f.root.step, f.ask, f.sentAt, f.back, f.sendErr, b.eventsOf(l.key))
			}
		}
	}
	return nil
}

// cClient runs one client's script.
type cClient struct {
	clk   *jumpClock
	b     *cBook
	c     int
	lines []cLine
	obs   *cObs // its observer now; nil once its silo refused a new one
}

func (c *cClient) do(ctx context.Context, o cOp, step int) {
	switch o.Op {
	case "jump":
		c.clk.off.Add(int64(o.Expiry))
		return
	case "poison":
		c.b.event("poison", o.Key)()
		c.b.mu.Lock()
		c.b.poison[o.Key] = true
		c.b.mu.Unlock()
		return
	case "read":
		c.read()
		return
	case "active":
		c.active(ctx, o.Key)
		return
	case "reopen":
		c.reopen(o.To)
		return
	case "deactivate", "stop":
		defer c.b.event(o.Op, o.Key)()
		c.lines = append(c.lines, cLine{op: o.Op, key: o.Key, step: step})
		var err error
		if o.Op == "stop" {
			err = c.b.silos[cSiloOf(o.Key)].Stop(ctx, cID(o.Key))
		} else {
			err = c.b.silos[cSiloOf(o.Key)].Deactivate(ctx, cID(o.Key))
		}
		if err != nil && !errors.Is(err, grain.ErrSiloClosed) {
			c.b.violate("%s %s: %v", o.Op, o.Key, err)
		}
		return
	}
	do, ask := cNote, true
	switch o.Op {
	case "tell":
		ask = false
	case "leave":
		do, ask = cLeave, false
	case "timer":
		do = cTimer
	case "untimer":
		do = cUntimer
	case "keep":
		do, ask = cKeep, false
	case "fwd":
		do = cFwdTell
		if o.Ask {
			do = cFwdAsk
		}
	case "bounce":
		do = cBounce
	case "await":
		do = cAwait
	case "stopfrom":
		do = cStopTo
	case "deactfrom":
		do = cDeactTo
	case "boom":
		do = cBoom
	case "oops":
		do = cOops
	case "fatal":
		do = cFatal
		defer c.b.event("fatal", o.Key)()
	case "notify":
		do, ask = cNotify, o.Ask
	}
	root := cRoot{c.c, step}
	ctx = context.WithValue(ctx, cRootKey{}, root)
	m := c.b.register(fmt.Sprint("c", c.c), o.Key, ask, cOrigin{short: o.Op == "short", root: root, has: true}, do, o.To)
	m.Due, m.Period = o.Expiry, o.Period
	if do == cNotify && c.obs != nil {
		m.Obs = c.obs.o.ID()
	}
	if !ask {
		c.b.sent(m.ID, c.b.silos[cSiloOf(o.Key)].Tell(ctx, cID(o.Key), m))
		return
	}
	actx, cancel := context.WithTimeout(ctx, cAskBound)
	timed := o.Op == "short" && c.b.timed
	switch {
	case timed:
		actx, cancel = context.WithCancel(ctx) // bounded by Config.CallTimeout
	case o.Op == "short":
		actx, cancel = context.WithTimeout(ctx, o.Expiry)
	}
	defer cancel()
	reply, err := c.b.silos[cSiloOf(o.Key)].Ask(actx, cID(o.Key), m)
	var te *grain.TimeoutError
	if timed && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &te) && !errors.Is(err, grain.ErrActivation) {
		c.b.violate("a short ask to %s, timed out by the silo's call timeout: %v (%T), not a *grain.TimeoutError", o.Key, err, err)
	}
	c.b.answered(m.ID, reply, err)
}

// active asks key's silo for the active grains of key's kind: each is of
// that kind, one of the run's grains, and named once (a stateless
// worker's activations are one identity).
func (c *cClient) active(ctx context.Context, key string) {
	kind := cID(key).Kind()
	actx, cancel := context.WithTimeout(ctx, cAskBound)
	defer cancel()
	ids, err := c.b.silos[cSiloOf(key)].ActiveGrains(actx, kind)
	if err != nil {
		if !errors.Is(err, grain.ErrSiloClosed) {
			c.b.violate("ActiveGrains(%s): %v", kind, err)
		}
		return
	}
	seen := map[grain.ID]bool{}
	for _, id := range ids {
		if seen[id] {
			c.b.violate("ActiveGrains(%s) in %s: %v twice", kind, cSiloOf(key), id)
		}
		seen[id] = true
		if id.Kind() != kind || !slices.ContainsFunc(cKeys, func(k string) bool { return cID(k) == id && cSiloOf(k) == cSiloOf(key) }) {
			c.b.violate("ActiveGrains(%s) in %s: %v, not a grain of the run's there", kind, cSiloOf(key), id)
		}
	}
}

// read takes what the client's observer holds now, without waiting.
func (c *cClient) read() {
	if c.obs == nil {
		return
	}
	for {
		select {
		case n, ok := <-c.obs.o.C():
			if !ok {
				return // closed as its silo stopped: the run's end reads the rest
			}
			c.b.received(c.obs, n)
		default:
			return
		}
	}
}

// reopen closes the client's observer — unless its silo has begun to end
// (cBook.endMu), the run's end reading what it holds then — and makes
// a new one in the silo named.
func (c *cClient) reopen(name string) {
	if c.obs != nil {
		c.b.endMu.RLock()
		if !c.b.ending[cSiloOf(c.obs.key)] {
			ended := c.b.event("oclose", c.obs.key)
			c.obs.o.Close()
			ended()
		}
		c.b.endMu.RUnlock()
	}
	c.obs = c.b.newObserver(name)
}

// jumpClock is the real clock, but for the jumps forward the clients make
// it take — a process paused, say, for a garbage collection or a VM's
// migration: what counts in time, an idle timeout, a quarantine, passes in
// a jump, the timers firing at their real times and finding it passed. It
// counts the timers set and neither fired nor stopped (armed), so that a
// run can check a stopped silo left none. Safe for concurrent use.
type jumpClock struct{ off, armed atomic.Int64 }

func (c *jumpClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *jumpClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	jt := &jumpTimer{c: c, armed: true}
	c.armed.Add(1)
	jt.t = time.AfterFunc(d, func() {
		jt.disarm()
		f()
	})
	return jt
}

// jumpTimer is a jumpClock's timer: a *time.Timer, counted while armed.
// Reset keeps the silo on the path it takes with the real clock (a wake
// reset in place). A Reset that races the timer's firing may leave the
// count one short, never one over: the check it serves misses a timer
// then, and never reports one that is not there.
type jumpTimer struct {
	c     *jumpClock
	t     *time.Timer
	mu    sync.Mutex
	armed bool
}

func (jt *jumpTimer) disarm() {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	if jt.armed {
		jt.armed = false
		jt.c.armed.Add(-1)
	}
}

// Stop disarms the timer whatever time.Timer.Stop says: false means it
// fired (its function may not have begun yet) or was stopped before.
func (jt *jumpTimer) Stop() bool {
	stopped := jt.t.Stop()
	jt.disarm()
	return stopped
}

func (jt *jumpTimer) Reset(d time.Duration) bool {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	active := jt.t.Reset(d)
	if !jt.armed {
		jt.armed = true
		jt.c.armed.Add(1)
	}
	return active
}

// sendsOut reports whether a send the book registered has not returned.
func (b *cBook) sendsOut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.ContainsFunc(b.msgs, func(m *cSent) bool { return !m.returned })
}

// cEndFrom makes its grain's turn shut its silo down, or close it, as an
// admin grain does (Silo.Shutdown from a turn: ErrShutdownFromTurn).
type cEndFrom struct{ Close bool }

// outcomesDue reports whether a tell taken (its send returned nil) has been
// neither handled nor made a dead letter (dead: the IDs of those that were).
func (b *cBook) outcomesDue(dead map[uint64]bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, m := range b.msgs {
		if m.returned && !m.ask && m.sendErr == nil && m.handled == 0 && !dead[uint64(i+1)] {
			return true
		}
	}
	return false
}

// cLogHandler marks each line the silo logs about a grain among the grain's
// events, for a failure's account: that it gave up on a hook, that a turn
// panicked. The silo's log writer writes them on a goroutine of its own,
// so a line's mark may come a little after what it tells of.
type cLogHandler struct{ b *cBook }

func (h cLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h cLogHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h cLogHandler) WithGroup(string) slog.Handler            { return h }
func (h cLogHandler) Handle(_ context.Context, r slog.Record) error {
	b := h.b
	var key string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "grain" {
			v := a.Value.String()
			key = v[strings.LastIndexAny(v, "/#")+1:]
		}
		return true
	})
	if key == "" {
		return nil
	}
	b.mu.Lock()
	b.mark("log: "+r.Message, key)
	b.mu.Unlock()
	return nil
}

// The model's check of each grain's order, on a book made by hand: a
// message that began before one whose send had returned before its own
// began fails it, whoever sent them; a call on a chain that lets calls
// back in, a stateless worker's, a dead letter's and a predicate's note
// against the rest do not.
func TestTheModelsOrderCheckFindsAnOvertakenMessage(t *testing.T) {
	sent := func(from, key string, sentAt, back, began int64, do cDo) *cSent {
		return &cSent{from: from, key: key, sentAt: sentAt, back: back, began: began, do: do, handled: 1, returned: true}
	}
	selfAsk := func(m *cSent) *cSent { m.ask = true; return m }
	fine := &cBook{msgs: []*cSent{
		sent("c0", "a", 1, 2, 5, cNote), sent("c1", "a", 3, 4, 6, cNote), // in order
		sent("c0", "b", 1, 2, 6, cNote), sent("g:c", "b", 3, 4, 5, cBack), // a bounce's call, let in on the chain
		sent("c0", "b", 7, 8, 12, cNote), sent("g:b self 3", "b", 9, 10, 11, cNote), // a call back into itself
		sent("c0", "e", 13, 14, 18, cNote), selfAsk(sent("g:e", "e", 15, 16, 17, cNote)), // an ask of its own: its turn waits for it
		sent("c0", "w", 1, 2, 6, cNote), sent("c1", "w", 3, 4, 5, cNote), // a stateless worker's
		sent("c0", "e", 1, 2, 6, cFwdTell), sent("c1", "e", 3, 4, 5, cNote), // the predicate's note, ahead of the rest
	}}
	dead := sent("c0", "c", 1, 2, 6, cNote)
	dead.dead = []grain.Reason{grain.ReasonStopped}
	fine.msgs = append(fine.msgs, dead, sent("c1", "c", 3, 4, 5, cNote))
	if err := fine.crossOrder(); err != nil {
		t.Fatalf("a book in order: %v", err)
	}

	overtaken := &cBook{msgs: []*cSent{sent("c0", "a", 1, 2, 6, cNote), sent("g:b", "a", 3, 4, 5, cNote)}}
	if err := overtaken.crossOrder(); err == nil || !strings.Contains(err.Error(), "began at 5, before c0's") {
		t.Fatalf("an overtaken message: %v", err)
	}
	notes := &cBook{msgs: []*cSent{sent("c0", "e", 1, 2, 6, cNote), sent("c1", "e", 3, 4, 5, cNote)}}
	if err := notes.crossOrder(); err == nil || !strings.Contains(err.Error(), "e (let in)") {
		t.Fatalf("the predicate's notes keep their order among themselves: %v", err)
	}
}

// The per-sender check flags a message handled after a later one from its
// sender that it was sent, and returned, before; and one handled twice. Two
// sends that overlapped — an OnDeactivate given up on, going on alone beside
// its grain's next activation — have no order to keep.
func TestTheModelsSenderCheckFindsAnOvertakenMessage(t *testing.T) {
	book := func(ms ...*cSent) *cBook {
		return &cBook{msgs: ms, handledOf: map[string][]cMsg{}}
	}
	handle := func(b *cBook, ids ...uint64) {
		for _, id := range ids {
			m := b.msgs[id-1]
			b.handle(cMsg{ID: id, From: m.from, N: int(id), Do: cNote}, m.key, 1)
		}
	}
	one := func(sentAt, back int64) *cSent {
		return &cSent{from: "g:a", key: "b", sentAt: sentAt, back: back, returned: back != 0}
	}

	inOrder := book(one(1, 2), one(3, 4))
	handle(inOrder, 1, 2)
	overlapped := book(one(1, 5), one(2, 3)) // the first's send returned after the second's began
	handle(overlapped, 2, 1)
	unreturned := book(one(1, 0), one(2, 3)) // the first's send not yet returned as it is handled
	handle(unreturned, 2, 1)
	for name, b := range map[string]*cBook{"in order": inOrder, "overlapped": overlapped, "not returned": unreturned} {
		if len(b.violations) != 0 {
			t.Errorf("%s: %v", name, b.violations)
		}
	}

	overtaken := book(one(1, 2), one(3, 4))
	handle(overtaken, 2, 1)
	if len(overtaken.violations) != 1 || !strings.Contains(overtaken.violations[0], "g:a>b: message 1 (ID 1) handled after 2 (ID 2)") {
		t.Errorf("an overtaken message: %v", overtaken.violations)
	}
	twice := book(one(1, 2))
	handle(twice, 1, 1)
	if len(twice.violations) != 1 || !strings.Contains(twice.violations[0], "message 1 (ID 1) handled after 1 (ID 1)") {
		t.Errorf("a message handled twice: %v", twice.violations)
	}
}
