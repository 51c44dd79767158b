package silo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/directory"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/idle"
	"github.com/granary-go/granary/internal/ctxerr"
	"github.com/granary-go/granary/queues"
)

// Silo lifecycle states.
const (
	stateNew int32 = iota
	stateRunning
	stateStopping // Shutdown or Close called
	stateStopped
)

// Silo hosts grains: it routes every message to its grain's partition,
// activates grains on their first message, runs their turns one at a time,
// and deactivates them when idle.
//
// The lifecycle follows net/http.Server: New, Register kinds, Start, then
// Shutdown (graceful) or Close (immediate). A silo cannot be restarted.
//
// A Silo is safe for concurrent use. Two silos in one process share nothing.
// Make one with New: the zero value refuses every call with ErrSiloClosed.
type Silo struct {
	cfg     Config
	rt      grain.Runtime    // what grains send through (Runtime): the silo, or its view with send filters
	kinds   map[string]*kind // written by Register before Start, then read-only
	kindOf  kindCache        // in front of kinds, for sends
	parts   []*partition
	locator directory.Local
	clock   clock.Clock
	realClk bool         // clock is clock.Real(): time.Now and time.AfterFunc
	maxOff  int32        // Config.MaxBlockingTurns, math.MaxInt32 for no bound (blocking.go)
	oneP    bool         // GOMAXPROCS was 1 at Start (yield.go)
	sincer  clock.Sincer // clock's, if it has one: the owners read it (partition.tick)
	epoch   time.Time
	// cpu reads the process's CPU time (processCPU; a test's stand-in):
	// on one core it tells a hog from a wait for a CPU (yield.go)
	cpu func() (time.Duration, bool)
	// incarnation is a number the silo draws for itself, never 0: it tells
	// its grains from another silo's of the same IDs in a call chain
	// (queues.Link.Silo) that passes through both.
	incarnation uint64

	mu        sync.Mutex
	state     atomic.Int32
	finishing bool // a finishStop is under way (mu)
	closing   bool // a Close began (mu): the idle ticks end (ticking)
	// graceAsked is the longest a stop asked finishStop to wait for the
	// turns running on (mu): a Close's, though a Shutdown's finishes the
	// stop (a Close while a Shutdown runs)
	graceAsked time.Duration
	// unwaited: the stop was finished by a Close from a turn, which waits
	// for no turn (mu): a Close after it waits for them (finishStop)
	unwaited bool
	// settling: a Shutdown lets the work under way finish, and the turns'
	// calls are still taken; busyParts counts the partitions not yet
	// quiet (settle.go)
	settling    atomic.Bool
	busyParts   atomic.Int64
	settleBound *time.Timer // ends a settling that takes too long (mu)

	base   context.Context // cancelled at Close: the ctx of tells and hooks
	cancel context.CancelFunc
	owners sync.WaitGroup // partition owners and the watchdog
	turns  sync.WaitGroup // turns running off their partition: handed off or interleaved (turnBegun, turnEnded)
	done   chan struct{}  // closed when every goroutine of the silo has returned

	dog watchdog
	// deadlockMu serialises the verdicts on cross-chain deadlocks
	// (deadlock.go); taken only when one was seen
	deadlockMu sync.Mutex
	idleTimer  clock.Timer // the next idle tick (mu)
	memTimer   clock.Timer // the next look at memory between idle ticks (mu; memlook.go)
	// idleAsleep: no partition had anything for the idle ticks to do, so
	// none is scheduled; the first owner that has something wakes them
	// (idleticks.go)
	idleAsleep atomic.Bool
	runners    *runners    // goroutines for handed-off partitions and interleaved turns
	letInMeta0 queues.Meta // what marks a message from outside as let in (letInMeta)

	timers  sync.Pool // *time.Timer, for default call timeouts
	replies sync.Pool // chan queues.Result, for asks
	// the rings of mailboxes that emptied, for the next backlog: a burst
	// behind a busy grain allocates nothing (partition.mbPush, mbPop)
	mailboxes activation.Spares
	dead      deadHub
	restarts  atomic.Uint64
	stops     atomic.Uint64
	slowTurns atomic.Uint64
	shedCount atomic.Uint64
	// sends that waited for room in a full partition queue (Stats().QueueWaits)
	queueWaits atomic.Uint64
	// sends that waited at the door of a grain whose full backlog held its
	// senders (Stats().BacklogWaits)
	backlogWaits atomic.Uint64
	// holds a grain's full backlog put on its partition's queue (Stats().BacklogHolds)
	backlogHolds atomic.Uint64
	deacts       [grain.NumDeactivationReasons]atomic.Uint64 // by reason, as each begins
	shed         shedState                                   // the idle ticker's
	gcRuns       sync.WaitGroup                              // GCs the ticker asked for (memory.go)

	// Last, off the lines that sends and owners read:
	liveTurns   atomic.Int64  // what turns counts, readable without waiting (offturns.go)
	failedTells atomic.Uint64 // failed turns with no caller (lifecycle.go: tellFailed)
	// baseEnded: base is cancelled, or about to be — no timer fires again,
	// so a turn's StartTimer is refused (act.StartTimer)
	baseEnded atomic.Bool
	observers observers
	logs      *logSampler              // Config.LogSampling (log.go)
	logw      *logWriter               // writes the lines logs let through (logwriter.go)
	deadMsgs  [grain.NumReasons]string // a tell's dead letter's log line, by reason (deadletter.go)

	// testFailedActivation, set by tests alone, runs in a failed
	// activation's turn once the turn has settled its race with the owner
	// and before it hands its first message back
	testFailedActivation func()
	// testHoldYield, set by tests alone, runs in place of the Gosched of a
	// turn that yields while it holds its partition (worker.holdYield)
	testHoldYield func()
}

// New returns a silo configured by cfg, or an error wrapping
// ErrInvalidConfig. It starts nothing.
func New(cfg Config) (*Silo, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pt, err := queues.NewPartitioner(cfg.Partitions)
	if err != nil {
		return nil, err
	}
	s := &Silo{
		cfg:      cfg,
		kinds:    make(map[string]*kind),
		locator:  directory.Local{Silo: cfg.Name, Partitioner: pt},
		clock:    cfg.Clock,
		done:     make(chan struct{}),
		runners:  newRunners(idleRunnersPerPartition * cfg.Partitions),
		logs:     newLogSampler(cfg.LogSampling),
		deadMsgs: deadMessages(),
	}
	for s.incarnation == 0 {
		s.incarnation = rand.Uint64()
	}
	s.logw = newLogWriter(cfg.Logger, &s.logs.dropped)
	s.letInMeta0.MayInterleave = true
	s.sincer, _ = cfg.Clock.(clock.Sincer)
	s.realClk = cfg.Clock == clock.Real()
	s.maxOff = math.MaxInt32
	if cfg.MaxBlockingTurns >= 0 {
		s.maxOff = int32(min(cfg.MaxBlockingTurns, math.MaxInt32))
	}
	s.cpu = processCPU
	limit := 0
	if cfg.MaxActivations > 0 {
		// Split evenly, rounded up, without overflowing for the largest
		// caps; and held to maxPartitionCap, far past any partition's
		// memory, so that the LRU sized from it cannot overflow either.
		limit = cfg.MaxActivations / cfg.Partitions
		if cfg.MaxActivations%cfg.Partitions != 0 {
			limit++
		}
		limit = min(limit, maxPartitionCap)
	}
	s.parts = make([]*partition, cfg.Partitions)
	for i := range s.parts {
		if s.parts[i], err = newPartition(s, i, limit); err != nil {
			return nil, err
		}
	}
	s.rt = s.runtimeView()
	return s, nil
}

// Start starts the partitions. It returns ErrAlreadyStarted if called twice,
// and ErrSiloClosed after Shutdown or Close.
func (s *Silo) Start() error {
	if err := s.made(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state.Load() {
	case stateRunning:
		return grain.ErrAlreadyStarted
	case stateStopping, stateStopped:
		return grain.ErrSiloClosed
	}
	if err := s.setIdleQuantum(); err != nil {
		return err
	}
	// The silo's own lifetime, not a caller's: cancelled by Close.
	s.base, s.cancel = context.WithCancel(context.Background())
	s.epoch = s.clock.Now()
	s.dog = newWatchdog()
	multiP := runtime.GOMAXPROCS(0) > 1 // read once: it takes the scheduler's lock
	s.oneP = !multiP
	for _, p := range s.parts {
		p.base, p.endBase = context.WithCancel(s.base)
		p.multiP = multiP
		s.owners.Add(1)
		go p.run(newWorker(p, false), nil)
	}
	s.owners.Add(1)
	go s.watch()
	s.scheduleIdle()
	s.state.Store(stateRunning)
	return nil
}

// Shutdown stops the silo gracefully. First the silo settles: messages from
// outside are refused with ErrSiloClosed at once, timers stop (a tick
// already queued is dropped, as after StopTimer), and the work under way
// finishes — turns in progress, the messages already queued, and
// what those turns send other grains (their calls and their tells carry the
// work on). Once no turn runs and nothing is queued anywhere — or, at the
// latest, after half the time ctx leaves or Config.DeactivationTimeout,
// whichever is first, so that a stuck handler or a grain that keeps telling
// itself cannot keep the others from saving their state — every grain is
// deactivated (OnDeactivate runs, bounded by Config.DeactivationTimeout;
// its sends to grains are refused, and so are those of turns still running
// by then — tells to observers go out, and observers close once the silo
// has stopped). A hook the silo gave up on — an OnDeactivate past that
// bound, an activation past Config.ActivationTimeout — is not waited for:
// it may still run when Shutdown returns. If ctx ends first, the silo
// closes as Close does — whatever is still undelivered becomes a dead
// letter with reason shutdown, handler contexts are cancelled, asks still
// being handled fail with ErrSiloClosed — and Shutdown returns ctx's error
// without waiting for the handlers, which may still be returning (a Close
// waits for them). Every pending ask has returned, or returns at once, when
// Shutdown does.
//
// Shutdown on a silo never started just marks it closed. Called from a
// grain's turn, it cannot wait for that turn: it begins the shutdown and
// returns ErrShutdownFromTurn at once. It knows the turn by the turn's ctx
// (an activation.ContextDecider is given its turn's): code the silo runs
// with no such ctx — a plain supervision Decider, a handler passing
// context.Background() — starts it on a goroutine of its own instead, or
// it waits for that code's turn, with a ctx that never ends for ever.
func (s *Silo) Shutdown(ctx context.Context) error {
	if err := s.made(); err != nil {
		return err
	}
	if ctx == nil {
		return grain.ErrNilContext // before anything stops: a bad call changes nothing
	}
	if s.fromTurn(ctx) {
		return s.shutdownFromTurn(ctx)
	}
	if !s.beginStop(opShutdown) {
		// Another stop began first: wait for it. One that has ended already
		// is nil whatever ctx's state — not a coin toss between two ready
		// cases (a deferred Shutdown with the program's ended ctx, say).
		select {
		case <-s.done:
			return nil
		default:
		}
		select {
		case <-s.done:
			return nil
		case <-ctx.Done():
			s.closeNow(0)
			return ctxerr.Of(ctx)
		}
	}
	s.boundSettling(ctx)
	if s.drainOrClose(ctx.Done()) {
		return nil
	}
	return ctxerr.Of(ctx)
}

// drainOrClose waits for a graceful stop to finish, or, once end is closed,
// closes the silo as Close does. It reports whether the stop was graceful.
func (s *Silo) drainOrClose(end <-chan struct{}) bool {
	select {
	case <-s.allStopped():
		s.finishStop(0)
		return true
	case <-end:
		s.closeNow(0)
		return false
	}
}

// Close stops the silo now: everything queued becomes a dead letter with
// reason shutdown, handler contexts are cancelled, asks still being handled
// fail with ErrSiloClosed, and OnDeactivate does not run. Close returns once
// the partitions have stopped and the turns in progress have noticed their
// ctx — waiting at most Config.DeactivationTimeout for handlers that ignore
// it, a Shutdown under way or not; called from a grain's turn, it cannot
// wait for that turn, and returns once the partitions have stopped — a
// Close from outside after it waits for the turns then. It returns nil
// (ErrSiloClosed for a Silo not made by New), and is safe to call more
// than once and after Shutdown.
func (s *Silo) Close() error {
	if err := s.made(); err != nil {
		return err
	}
	grace := s.cfg.DeactivationTimeout
	if onTurnStack() {
		grace = noWait
	}
	s.closeNow(grace)
	return nil
}

// closeNow closes the partitions and waits for them, then up to grace for
// turns running off their partitions.
func (s *Silo) closeNow(grace time.Duration) {
	s.beginStop(opClose)
	s.settling.Store(false) // a Shutdown's turns may call no more
	s.mu.Lock()
	s.closing = true
	s.graceAsked = max(s.graceAsked, grace)
	s.stopIdle()
	if s.settleBound != nil {
		s.settleBound.Stop()
	}
	started := s.base != nil
	if started {
		// opClose first, then cancel: a turn that returns because its ctx
		// was cancelled finishes after the partition has begun closing, so
		// nothing queued behind it runs.
		for _, p := range s.parts {
			p.q.Close() // after a Shutdown, it took the turns' calls
			select {
			case <-p.done: // stopped already (Close after Shutdown): nothing to close
			default:
				p.q.PushControl(ctl{op: opClose})
			}
		}
		s.endBase()
	}
	s.mu.Unlock()
	if started {
		<-s.allStopped()
	}
	s.finishStop(grace)
}

// beginStop refuses new messages and tells every partition to stop. It
// reports false if a stop had already begun.
func (s *Silo) beginStop(op ctlOp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.state.Load()
	if prev == stateStopping || prev == stateStopped {
		return false
	}
	if op == opShutdown && prev == stateRunning {
		// Before the state: a turn's call that sees the silo stopping must
		// see it settling too (admitSend).
		s.busyParts.Store(int64(len(s.parts)))
		s.settling.Store(true)
	}
	s.state.Store(stateStopping)
	if prev == stateNew {
		s.state.Store(stateStopped)
		close(s.done)
		s.closeObservers()
		s.dead.close()
		return false
	}
	if op != opShutdown {
		s.closing = true
	}
	s.stopIdle() // the ticks go on through a Shutdown (ticking)
	for _, p := range s.parts {
		if op == opShutdown {
			p.q.Restrict(&s.busyParts) // the turns under way may still call (settle.go)
		} else {
			p.q.Close()
		}
		// Placed among the messages: those queued ahead of a Shutdown
		// were sent before it (sentBeforeShutdown).
		p.q.PushControlAt(func(ahead int) ctl { return ctl{op: op, ahead: ahead} })
	}
	return true
}

// allStopped returns a channel closed once every partition has stopped.
func (s *Silo) allStopped() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for _, p := range s.parts {
			<-p.done
		}
		close(ch)
	}()
	return ch
}

// noWait as a grace: Close was called from a turn, which it must not wait
// for (nor warn about).
const noWait time.Duration = -1

// finishStop waits for the partition owners and the watchdog, then up to
// grace for turns still running off their partitions (handlers that have
// been told to stop), and marks the silo stopped. One caller does it; the
// others wait for it to be done — but a Close from a turn (grace noWait)
// does not, since the one finishing may be waiting for that very turn. No
// lock is held while waiting, for the same reason.
func (s *Silo) finishStop(grace time.Duration) {
	s.mu.Lock()
	if s.finishing || s.state.Load() == stateStopped {
		s.mu.Unlock()
		if grace != noWait {
			<-s.done
			s.mu.Lock()
			unwaited := s.unwaited
			s.mu.Unlock()
			if unwaited && grace > 0 {
				// A grain's turn closed the silo, waiting for no turn —
				// its own among them: this Close waits for them as a Close
				// does. Until the seventy-third session it returned at
				// once, the turns still running.
				s.awaitTurns(grace)
			}
		}
		return
	}
	s.finishing = true
	s.stopIdle()
	close(s.dog.stop)
	s.mu.Unlock()
	s.owners.Wait() // after this, nothing starts a turn goroutine
	s.gcRuns.Wait() // a GC the idle ticker asked for (memory.go): it ends
	s.endBase()
	if grace != noWait {
		// A Close that came while a Shutdown ran (the Shutdown finishing,
		// with no grace of its own) waits for the turns as a Close does:
		// until the seventy-third session it returned with them still
		// running, the first message of an activation among them run
		// after it. (Not for a Close from a turn: it would wait for
		// itself.)
		s.mu.Lock()
		grace = max(grace, s.graceAsked)
		s.mu.Unlock()
	}
	allDone := s.liveTurns.Load() == 0
	// Waiting for them only with a grace to wait: a graceful Shutdown has
	// none (its turns finished, or it gave up on a stuck one and said so),
	// and a warning then would be about turns that are just returning.
	if !allDone && grace > 0 {
		if allDone = s.awaitTurns(grace); !allDone {
			s.log(slog.LevelWarn, "granary: silo stopped with turns still running; their handlers ignore ctx")
		}
	}
	s.runners.stop(allDone) // the waiting ones go; with no turn left, all of them
	for _, p := range s.parts {
		p.dropLeftovers() // and what a turn still running queues later
	}
	s.closeObservers()
	s.dead.close()
	s.logw.close() // the last lines, the warning above included
	s.mu.Lock()
	s.unwaited = grace == noWait && !allDone
	s.state.Store(stateStopped)
	close(s.done)
	s.mu.Unlock()
}

// awaitTurns waits up to grace for the turns running off their partitions
// to return, and reports whether they did.
func (s *Silo) awaitTurns(grace time.Duration) bool {
	if s.liveTurns.Load() == 0 {
		return true
	}
	turnsDone := make(chan struct{})
	go func() {
		s.turns.Wait()
		close(turnsDone)
	}()
	select {
	case <-turnsDone:
		return true
	case <-time.After(grace):
		return false
	}
}

// endBase ends the silo's base ctx, and with it every turn's: those that
// made a Done channel of their own are ended through their partition's
// liveCtxs.
func (s *Silo) endBase() {
	s.baseEnded.Store(true) // before the cancel: a hook woken by it sees it
	s.cancel()
	for _, p := range s.parts {
		p.endBase() // ended with its parent already; said for the reader and vet
		p.live.end()
	}
}

// since returns the silo clock's time since Start, the time base of idle
// deadlines, backoffs and quarantines.
func (s *Silo) since() time.Duration {
	if s.sincer != nil {
		return s.sincer.Since(s.epoch)
	}
	return s.clock.Now().Sub(s.epoch)
}

// after runs f once d has passed on the silo clock.
func (s *Silo) after(d time.Duration, f func()) clock.Timer { return s.clock.AfterFunc(d, f) }

// maxPartitionCap bounds a partition's share of Config.MaxActivations: a
// trillion activations, more than any machine holds — or, where int has 32
// bits, as many as the LRU sized from it (2*limit+16) can count.
const maxPartitionCap = min(1<<40, (math.MaxInt-16)/2)

// setIdleQuantum fixes the idle wheel's tick now that the kinds are known,
// and builds the partitions' wheels with it.
func (s *Silo) setIdleQuantum() error {
	if s.cfg.IdleQuantum == 0 {
		q := DefaultIdleQuantum
		if s.cfg.ActivationTimeout > 0 {
			// The ticks give up on an activation past its bound
			// (checkActivations): a bound of 80 ms checked once a second
			// let a hook run on, its ctx live, for up to a second.
			q = min(q, s.cfg.ActivationTimeout/8)
		}
		for _, k := range s.kinds {
			if k.idleTimeout > 0 {
				q = min(q, k.idleTimeout/8)
			}
			if k.workers > 1 && k.spareIdle > 0 {
				q = min(q, k.spareIdle/8)
			}
		}
		s.cfg.IdleQuantum = max(q, time.Millisecond)
	}
	for _, p := range s.parts {
		w, err := idle.NewWheel[struct{}](s.cfg.IdleQuantum, 0, 0)
		if err != nil {
			return err
		}
		p.wheel = w
	}
	return nil
}

// admit runs the checks every send and system message starts with — a
// silo and a ctx to use, a ctx not done yet, a valid target and message —
// and returns the target's partition, kind and identity hash.
func (s *Silo) admit(ctx context.Context, id grain.ID, msg any) (*partition, *kind, uint64, error) {
	if s == nil {
		return nil, nil, 0, errNilSilo
	}
	if ctx == nil {
		return nil, nil, 0, grain.ErrNilContext
	}
	if ctx.Err() != nil { // inline: s.ctxErr is a call, on every send
		if err := s.ctxErr(ctx); err != nil { // read again: a ctx of a user's may say nil now
			return nil, nil, 0, err
		}
	}
	return s.check(id, msg)
}

// check validates a send, so that nothing bad is ever enqueued, and returns
// the target's partition and identity hash.
func (s *Silo) check(id grain.ID, msg any) (*partition, *kind, uint64, error) {
	// The state first: before Start, Register may still be writing kinds.
	switch s.state.Load() {
	case stateRunning:
	case stateNew:
		if s.done == nil {
			return nil, nil, 0, errNotNew
		}
		return nil, nil, 0, ErrNotStarted
	default:
		return nil, nil, 0, grain.ErrSiloClosed // exactly this value: see admitSend
	}
	return s.checkTarget(id, msg)
}

// checkTarget is check past the silo's state.
func (s *Silo) checkTarget(id grain.ID, msg any) (*partition, *kind, uint64, error) {
	// A 48-byte ID never lives in registers: the entry stores it to the
	// stack 8 bytes at a time, and an accessor by value copies it whole
	// with 16-byte loads, which stall on store forwarding. So the kind is
	// read in place (kindName), the key and the hash through a pointer, and
	// the kind's part of the hash is the kind's own (checkTarget 29 ns
	// before, 17.5 after: docs/performance-log.md, items 48–50).
	k, ok := s.kindOf.get(kindName(&id), s.kinds)
	if !ok {
		if id.IsObserver() {
			return nil, nil, 0, errObserverTarget // Tell sends it on (observer.go)
		}
		if err := id.Validate(); err != nil {
			return nil, nil, 0, err
		}
		return nil, nil, 0, fmt.Errorf("%w: %q", grain.ErrUnknownKind, id.Kind())
	}
	// A registered kind is a valid one; only the key is left to check.
	if !id.HasKey() {
		return nil, nil, 0, &grain.IDError{ID: id, Err: grain.ErrEmptyKey}
	}
	if msg == nil {
		return nil, nil, 0, grain.ErrNilMessage
	}
	h := id.HashWithKind(k.nameHash)
	loc := s.locator.LocateHash(h)
	if k.workers > 1 { // a stateless worker: always here, in one of its partitions
		return s.pickWorker(k, loc.Partition, h), k, h, nil
	}
	if loc.Silo != s.cfg.Name {
		return nil, nil, 0, fmt.Errorf("%w: %v is on %q", grain.ErrRemote, id, loc.Silo)
	}
	return s.parts[loc.Partition], k, h, nil
}

// push enqueues env on p. A grain known to be overloaded refuses it with
// ErrOverloaded (and a dead letter), and one whose full backlog holds its
// senders makes the sender wait at its door (door.go); a full partition
// queue makes the sender wait for room, as a full channel would. Either
// wait lasts as long as ctx allows — a turn that waits hands its partition
// off first, so two grains or partitions sending to each other cannot
// deadlock. A closed queue is ErrSiloClosed. first is the queue's: env
// found nothing queued ahead of it (Queue.PushOrWait).
func (s *Silo) push(ctx context.Context, p *partition, env *queues.Envelope, ti *turnInfo) (first bool, err error) {
	if p.ovN.Load() != 0 {
		if err := s.atDoor(ctx, p, env, ti); err != nil {
			return false, err
		}
	}
	late := false // a turn's send while the silo settles (settle.go)
	var waited <-chan struct{}
	counted := false // in Stats().QueueWaits
	for {
		var space <-chan struct{}
		if late {
			space, first, err = p.q.PushLateOrWait(env, waited)
		} else {
			space, first, err = p.q.PushOrWait(env, waited)
		}
		waited = nil
		switch {
		case err == nil:
			if ti != nil && !p.turnSent.Load() {
				p.turnSent.Store(true) // work under way: its owner may run it ahead (ahead.go)
			}
			if w := p.stepOff.Load(); w != nil {
				p.stepAside(w, env, ti) // a flood's slow step holds the partition (stepoff.go)
			} else if h := p.flooding.Load(); h != 0 && h != env.Hash {
				p.neighbourCame(ti)
			}
			return first, nil
		case !errors.Is(err, queues.ErrFull):
			if !late && s.lateSend(ti) {
				late = true // a restricted queue: a turn's send still goes
				continue
			}
			return false, grain.ErrSiloClosed
		}
		if !counted {
			counted = true
			s.queueWaits.Add(1) // once a send, at its first wait
		}
		if ti != nil {
			// A call holding its grain's turn token until its request is
			// queued (leaveToken) holds it through this wait too: the
			// owners make room whatever the grain's turns do, and a turn
			// let in would send ahead of the request.
			ti.w.detach()
		}
		select {
		case <-space:
			waited = space // the Drain that closed it held room for this send
		case <-ctx.Done():
			p.q.GiveUp(space)
			if !s.refuse(*env, grain.ReasonOverload, nil) {
				return false, fmt.Errorf("%w: %w", grain.ErrSiloClosed, s.ctxErr(ctx))
			}
			return false, fmt.Errorf("%w: partition %d queue full: %w", grain.ErrOverloaded, p.idx, s.ctxErr(ctx))
		}
	}
}
