package silo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/directory"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/idle"
	"github.com/granary-go/granary/queues"
)

// ctlOp is a control message for a partition's owner. Control messages take
// the queue's control lane, which is drained ahead of user messages.
type ctlOp uint8

const (
	opTurnDone ctlOp = iota + 1 // a handed-off or interleaved turn finished
	opIdleTick                  // advance the idle wheel
	opRestart                   // a restart's backoff passed
	opTimer                     // a grain timer fired
	opShutdown                  // drain, then deactivate everything
	opClose                     // drop everything now
)

type ctl struct {
	op    ctlOp
	a     *act
	res   turnResult
	tm    *grainTimer
	first queues.Envelope // opTurnDone: the first message of a failed activation
}

type turnKind uint8

const (
	tkMessage turnKind = iota
	tkActivate
	tkDeactivate
)

type turnResult struct {
	kind   turnKind
	err    error        // the activation's error, or the message's
	tick   *queues.Tick // the turn ran a timer's tick
	ranMsg bool         // an activation turn went on to run its first message
}

type mode uint8

const (
	modeRunning  mode = iota
	modeDraining      // Shutdown: handle what is queued, then deactivate all
	modeClosing       // Close, or Shutdown past its deadline: dead-letter all
)

// partition is one of the silo's fixed set of queues, with the activations
// whose identities hash to it. Everything under "owner" is touched only by the
// goroutine that currently owns the partition, so none of it is locked.
type partition struct {
	// read by senders: kept apart from what the owner writes, so that a
	// send does not pull a cache line the owner is writing
	s   *Silo
	idx int
	q   *queues.Queue[queues.Envelope, ctl]
	ovN atomic.Int32 // len(ov), for the cheap "nothing is overloaded" check
	_   [64]byte

	// owner
	dir        *directory.Table[*act]
	wheel      *idle.Wheel[*act]
	lru        *simplelru.LRU[grain.ID, *act] // nil when the silo has no cap
	limit      int
	quarantine map[grain.ID]time.Duration
	ready      []*act
	rhead      int
	batch      queues.Batch[queues.Envelope, ctl]
	ctls       []ctl
	cpos       int
	expired    []*idle.Entry[*act]
	now        time.Duration
	inflight   int // turns running, inline or on other goroutines
	mode       mode
	timerSeq   uint64
	done       chan struct{} // closed when the partition has stopped for good

	// shared
	cur      atomic.Pointer[worker] // the owner, for the watchdog
	handled  atomic.Uint64          // published from nHandled once per round
	nHandled uint64                 // owner
	handoffs atomic.Uint64
	backlog  atomic.Int64 // messages waiting in mailboxes
	ovMu     sync.Mutex
	ov       map[grain.ID]struct{} // grains whose backlog is full
}

func newPartition(s *Silo, idx, limit int) (*partition, error) {
	w, err := idle.NewWheel[*act](s.cfg.IdleQuantum, 0, 0)
	if err != nil {
		return nil, err
	}
	p := &partition{
		s:          s,
		idx:        idx,
		q:          queues.New[queues.Envelope, ctl](s.cfg.QueueCapacity),
		dir:        directory.NewTable[*act](func(a *act) *grain.ID { return &a.ID }),
		wheel:      w,
		limit:      limit,
		quarantine: make(map[grain.ID]time.Duration),
		ov:         make(map[grain.ID]struct{}),
		done:       make(chan struct{}),
	}
	if limit > 0 {
		// Sized above the limit: evictions are ours to choose (idle grains
		// only), never the LRU's own.
		if p.lru, err = simplelru.NewLRU[grain.ID, *act](2*limit+16, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// run is the body of a goroutine that owns the partition until it hands the
// partition off or the partition stops.
func (p *partition) run(w *worker) {
	defer p.s.workers.Done()
	p.cur.Store(w)
	p.now = p.s.since()
	for p.step(w) {
	}
}

// step does one round: control messages, then user messages, then one turn
// of each ready activation, then refills from the queue (blocking if there
// is nothing to do). It returns false when w no longer owns the partition.
func (p *partition) step(w *worker) bool {
	for p.cpos < len(p.ctls) {
		c := p.ctls[p.cpos]
		p.ctls[p.cpos] = ctl{}
		p.cpos++
		if !p.control(w, c) {
			return false
		}
	}
	for {
		env, ok := p.batch.Pop()
		if !ok {
			break
		}
		if !p.deliver(w, &env) {
			return false
		}
	}
	if !p.runReady(w) {
		return false
	}
	p.handled.Store(p.nHandled)
	if p.mode != modeRunning && p.stopped() {
		return false
	}
	p.batch, p.ctls = p.q.Drain(p.ctls[:0])
	p.cpos = 0
	if p.batch.Empty() && len(p.ctls) == 0 && p.rhead == len(p.ready) {
		<-p.q.Wake()
		p.batch, p.ctls = p.q.Drain(p.ctls)
	}
	p.now = p.s.since()
	return true
}

// deliver routes one envelope to its activation, activating the grain if it
// has none. It runs the turn at once when the grain is idle.
func (p *partition) deliver(w *worker, env *queues.Envelope) bool {
	if p.mode == modeClosing {
		p.s.deadLetter(*env, grain.ReasonShutdown, nil)
		return true
	}
	a, ok := p.dir.Get(env.Target, env.Hash)
	if !ok {
		if until, q := p.quarantine[env.Target]; q {
			if p.now < until {
				p.s.deadLetter(*env, grain.ReasonQuarantined, nil)
				return true
			}
			delete(p.quarantine, env.Target)
		}
		// The activation turn runs the first message too, so it needs no
		// mailbox: most grains never have one.
		a = p.activate(p.s.kinds[env.Target.Kind()], env.Target, env.Hash)
		return p.runTurn(w, a, tkActivate, *env)
	}
	return p.enqueue(w, a, env)
}

// enqueue gives env to a: at once if a is idle, else into its mailbox,
// applying the backlog limit.
func (p *partition) enqueue(w *worker, a *act, env *queues.Envelope) bool {
	if a.stopping {
		p.s.deadLetter(*env, grain.ReasonQuarantined, nil)
		return true
	}
	if a.State() == activation.Active && !a.deactWant && !a.busy() && a.Mailbox.Len() == 0 {
		if p.lru != nil {
			p.lru.Get(a.ID)
		}
		return p.runTurn(w, a, tkMessage, *env)
	}
	// A busy grain (its first turn included: activation and first message
	// run as one) may take env now if its turn waits in a call that lets
	// env in.
	if a.busy() && !a.deactWant && a.State() <= activation.Active && p.canInterleave(a, env) {
		p.interleave(a, *env)
		return true
	}
	if a.Mailbox.Len() >= a.k.maxBacklog {
		switch a.k.overflow {
		case DropOldest:
			old, _ := p.mbPop(a)
			p.s.deadLetter(old, grain.ReasonOverload, nil)
		default:
			// RejectNewest refuses at the door (Silo.push, through the
			// overloaded set); a message already accepted into the
			// partition queue is never dropped. The backlog can pass its
			// limit by what was in flight, which the queue capacity bounds.
			p.setOverfull(a, true)
		}
	} else if a.k.overflow == RejectNewest && a.Mailbox.Len()+1 >= a.k.maxBacklog {
		p.setOverfull(a, true) // before the push: once the backlog shows full, senders are refused
	}
	p.mbPush(a, *env)
	return true
}

// activate creates the activation of id; the caller runs its activation
// turn or readies it. With an activation cap, the least recently used idle
// grain is asked to deactivate first.
func (p *partition) activate(k *kind, id grain.ID, h uint64) *act {
	a := &act{p: p, k: k}
	a.ID = id
	a.idle.Value = a
	p.dir.Put(id, h, a)
	k.active.Add(1)
	if p.lru != nil {
		p.lru.Add(id, a)
		p.evict()
	}
	return a
}

// evict asks least recently used idle grains to deactivate until the
// partition is within its cap, not counting grains already on their way out.
func (p *partition) evict() {
	over := p.lru.Len() - p.limit
	for tries := p.lru.Len(); over > 0 && tries > 0; tries-- {
		id, a, ok := p.lru.GetOldest()
		if !ok {
			return
		}
		if a.State() == activation.Active && !a.busy() && a.Mailbox.Len() == 0 {
			p.lru.Remove(id) // out of the count now; gone once OnDeactivate ran
			a.deactWant = true
			p.makeReady(a)
			over--
			continue
		}
		p.lru.Get(id) // busy or not active yet: look further
	}
}

func (p *partition) makeReady(a *act) {
	if a.inReady {
		return
	}
	a.inReady = true
	p.ready = append(p.ready, a)
}

// runReady gives each activation that was ready when it started one step.
func (p *partition) runReady(w *worker) bool {
	for n := len(p.ready) - p.rhead; n > 0; n-- {
		a := p.ready[p.rhead]
		p.ready[p.rhead] = nil
		p.rhead++
		if p.rhead == len(p.ready) {
			p.ready, p.rhead = p.ready[:0], 0
		}
		a.inReady = false
		if !p.advance(w, a) {
			return false
		}
	}
	return true
}

// advance takes the next due step of a's lifecycle, if no turn of a runs:
// activate it, deactivate it, or run its oldest waiting message.
func (p *partition) advance(w *worker, a *act) bool {
	if a.busy() {
		return true // its finish readies it again
	}
	switch a.State() {
	case activation.Activating:
		if p.mode == modeClosing {
			p.remove(a)
			return true
		}
		return p.runTurn(w, a, tkActivate, queues.Envelope{})
	case activation.Active:
		if a.deactWant {
			return p.beginDeactivate(w, a)
		}
		env, ok := p.mbPop(a)
		if !ok {
			return true
		}
		if a.overfull && a.Mailbox.Len() < a.k.maxBacklog {
			p.setOverfull(a, false)
		}
		if a.Mailbox.Len() > 0 {
			p.makeReady(a) // one turn per round, so every ready grain gets a turn
		}
		return p.runTurn(w, a, tkMessage, env)
	case activation.Backoff:
		if a.deactWant { // shutdown or eviction while backing off: no instance to deactivate
			_ = a.Transition(activation.Deactivating)
			p.remove(a)
		}
	}
	return true
}

func (p *partition) beginDeactivate(w *worker, a *act) bool {
	a.deactWant = false
	_ = a.Transition(activation.Deactivating)
	p.stopTimers(a)
	p.wheel.Remove(&a.idle)
	if p.lru != nil {
		p.lru.Remove(a.ID)
	}
	if a.g == nil {
		p.remove(a)
		return true
	}
	return p.runTurn(w, a, tkDeactivate, queues.Envelope{})
}

// remove takes a out of the directory. Messages that waited for it go to a
// fresh activation (Orleans forwards the same way), unless the grain was
// stopped or the silo is closing.
func (p *partition) remove(a *act) {
	_ = a.Transition(activation.Gone)
	p.dir.Delete(a.ID, a.ID.Hash())
	a.k.active.Add(-1)
	p.wheel.Remove(&a.idle)
	if p.lru != nil {
		p.lru.Remove(a.ID)
	}
	p.stopTimers(a)
	if a.overfull {
		p.setOverfull(a, false)
	}
	if a.Mailbox.Len() == 0 {
		return
	}
	switch {
	case p.mode == modeClosing:
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonShutdown, nil) })
	case a.stopping:
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonStopped, nil) })
	default:
		b := p.activate(a.k, a.ID, a.ID.Hash())
		b.Mailbox, a.Mailbox = a.Mailbox, activation.Mailbox{}
		p.makeReady(b)
		if b.Mailbox.Len() >= b.k.maxBacklog && b.k.overflow == RejectNewest {
			p.setOverfull(b, true)
		}
	}
}

// runTurn runs one turn of a on w's goroutine. If the partition was handed
// off while the turn ran, the finish goes to the new owner as a control
// message and runTurn returns false: w must stop touching the partition.
func (p *partition) runTurn(w *worker, a *act, k turnKind, env queues.Envelope) bool {
	a.running++
	p.inflight++
	w.begin()
	var res turnResult
	if k == tkMessage {
		res = p.executeMessage(w, a, &env) // the hot path, kept small
	} else {
		res = p.execute(w, a, k, &env, false)
	}
	var first *queues.Envelope // an activation turn's message, if it did not run
	if k == tkActivate && !res.ranMsg && env.Msg != nil {
		first = &env
	}
	if !w.end() {
		c := ctl{op: opTurnDone, a: a, res: res}
		if first != nil {
			c.first = *first
		}
		p.q.PushControl(c)
		return false
	}
	p.finish(a, res, first)
	return true
}

// interleave runs a turn of a busy grain on a goroutine of its own: a call
// re-entering a grain that waits in the chain, or a message to a reentrant
// grain that waits in a call. The turn token keeps the two turns' code from
// running at the same time.
func (p *partition) interleave(a *act, env queues.Envelope) {
	a.running++
	p.inflight++
	w := newWorker(p, true)
	p.s.workers.Add(1)
	go func() {
		defer p.s.workers.Done()
		res := p.execute(w, a, tkMessage, &env, true)
		p.q.PushControl(ctl{op: opTurnDone, a: a, res: res})
	}()
}

// canInterleave: a busy grain may run env now only while its turn waits in
// a call that allows it (see docs/calls.md).
func (p *partition) canInterleave(a *act, env *queues.Envelope) bool {
	if a.waiting() == 0 {
		return false
	}
	return a.k.reentrant || (env.Request != nil && env.Request.Interleave)
}

// execute runs user code: a message, OnActivate or OnDeactivate. It touches
// no partition state, since it may run after the partition was handed off.
// An interleaved turn holds the grain's turn token throughout.
func (p *partition) execute(w *worker, a *act, k turnKind, env *queues.Envelope, interleaved bool) turnResult {
	if interleaved {
		a.extra().token.Lock()
	}
	res := turnResult{kind: k}
	tc := p.turnCtxFor(w, a, env, interleaved)
	if k == tkDeactivate {
		ctx, cancel := context.WithTimeout(p.s.base, p.s.cfg.DeactivationTimeout)
		defer cancel()
		tc = &turnCtx{base: p.s.base}
		tc.reset(ctx, turnInfo{a: a, w: w, holdsToken: interleaved})
	}
	res.tick = p.setContext(w, a, env)
	switch k {
	case tkMessage:
		res.err = p.runMessage(tc, a, w, env)
	case tkActivate:
		g, err := activation.Build(a.ID, a.k.factory)
		if err == nil {
			a.g = g
			err = activation.Activate(tc, g, &w.gc)
		}
		if err != nil {
			res.err = err // finish fails the first message with the rest
			break
		}
		if env.Msg != nil { // the first message, in the same turn
			res.ranMsg = true
			res.err = p.runMessage(tc, a, w, env)
		}
	case tkDeactivate:
		res.err = activation.Deactivate(tc, a.g, &w.gc)
	}
	if tc.info.holdsToken {
		a.extra().token.Unlock()
	}
	tc.release()
	return res
}

// executeMessage is execute for an ordinary message turn.
func (p *partition) executeMessage(w *worker, a *act, env *queues.Envelope) turnResult {
	tc := p.turnCtxFor(w, a, env, false)
	res := turnResult{kind: tkMessage, tick: p.setContext(w, a, env)}
	res.err = p.runMessage(tc, a, w, env)
	if tc.info.holdsToken { // it took the token back after a reentrant call
		a.extra().token.Unlock()
	}
	tc.release()
	return res
}

// turnCtxFor returns the context of the turn: the ask's own, or the
// worker's, reset.
func (p *partition) turnCtxFor(w *worker, a *act, env *queues.Envelope, interleaved bool) *turnCtx {
	info := turnInfo{a: a, req: env.Request, w: w, holdsToken: interleaved}
	if env.Request != nil {
		tc := env.Request.Local.(*turnCtx)
		tc.reset(env.Request.Ctx, info)
		return tc
	}
	w.tc.reset(nil, info)
	return &w.tc
}

// setContext points the worker's grain.Context at the turn, and returns
// the timer tick the message is, if it is one.
func (p *partition) setContext(w *worker, a *act, env *queues.Envelope) *queues.Tick {
	var sender *grain.ID
	var tick *queues.Tick
	if env.Meta != nil {
		sender, tick = &env.Meta.Sender, env.Meta.Tick
	}
	w.gc = grain.ContextFor(&a.ID, sender, p.s, a)
	return tick
}

// runMessage runs the handler and answers the ask, if it is one.
func (p *partition) runMessage(tc *turnCtx, a *act, w *worker, env *queues.Envelope) error {
	reply, err := activation.Run(tc, a.g, &w.gc, env.Msg)
	if env.Request != nil {
		env.Request.Resolve(reply, err)
	}
	return err
}

// finish applies a finished turn's outcome. It never runs a turn itself: it
// readies the activation, and runReady takes the next step.
func (p *partition) finish(a *act, res turnResult, first *queues.Envelope) {
	a.running--
	p.inflight--
	p.nHandled++
	switch res.kind {
	case tkActivate:
		if res.err != nil && !res.ranMsg {
			p.activationFailed(a, res.err, first)
			return
		}
		_ = a.Transition(activation.Active)
		if !p.afterMessage(a, res) {
			return
		}
	case tkDeactivate:
		if res.err != nil {
			p.s.cfg.Logger.Warn("granary: OnDeactivate failed", "grain", a.ID.String(), "err", res.err)
		}
		p.remove(a)
		return
	case tkMessage:
		if !p.afterMessage(a, res) {
			return
		}
	}
	if a.busy() {
		return
	}
	if p.mode == modeClosing { // Close came while the turn ran
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonShutdown, nil) })
		if a.State() != activation.Activating {
			_ = a.Transition(activation.Deactivating)
		}
		p.remove(a)
		return
	}
	if a.deactWant || a.Mailbox.Len() > 0 {
		p.makeReady(a)
	}
}

// afterMessage applies what a turn asked for (timers, deactivation), keeps
// the idle clock, and applies the supervision policy to a failure. It
// reports false if the grain restarted (nothing more to do for this turn).
func (p *partition) afterMessage(a *act, res turnResult) bool {
	deact, ops := a.takeRequests()
	if res.tick == nil || a.k.timerKeepAlive {
		p.touch(a)
	}
	if res.tick != nil {
		p.tickDone(a, res.tick)
	}
	p.applyTimers(a, ops)
	if res.err != nil && a.State() == activation.Active && !a.busy() {
		d, backoff := a.k.sup.Decide(&a.Restarts, a.ID, res.err, p.now)
		switch d {
		case activation.Restart:
			p.restart(a, backoff)
			return false
		case activation.Stop:
			p.stop(a)
		}
	}
	if deact {
		a.deactWant = true
	}
	return true
}

func (p *partition) touch(a *act) {
	if a.k.idleTimeout > 0 {
		p.wheel.Touch(&a.idle, p.now+a.k.idleTimeout)
	}
}

// activationFailed fails every message that waited for the activation and
// forgets it: the next message tries afresh.
func (p *partition) activationFailed(a *act, err error, first *queues.Envelope) {
	aerr := &grain.ActivationError{ID: a.ID, Err: err}
	var waiting []queues.Envelope
	p.mbDrain(a, func(e queues.Envelope) { waiting = append(waiting, e) })
	a.g = nil
	// Out of the directory first, so a caller who sees the error finds the
	// grain gone and its next message tries afresh.
	p.remove(a)
	if first != nil {
		p.s.deadLetter(*first, grain.ReasonActivationFailed, aerr)
	}
	for _, e := range waiting {
		p.s.deadLetter(e, grain.ReasonActivationFailed, aerr)
	}
}

// restart drops the failed instance and builds a fresh one after backoff.
// Messages wait in the mailbox meanwhile.
func (p *partition) restart(a *act, backoff time.Duration) {
	_ = a.Transition(activation.Backoff)
	p.stopTimers(a)
	a.g = nil
	if x := a.x.Load(); x != nil {
		x.mu.Lock()
		x.deactivate, x.keepUntil, x.timerOps = false, 0, nil
		x.mu.Unlock()
	}
	p.s.restarts.Add(1)
	if backoff <= 0 {
		_ = a.Transition(activation.Activating)
		p.makeReady(a)
		return
	}
	p.s.after(backoff, func() { p.q.PushControl(ctl{op: opRestart, a: a}) })
}

// stop quarantines the grain and deactivates it; what waits for it is a dead
// letter.
func (p *partition) stop(a *act) {
	a.stopping = true
	p.s.stops.Add(1)
	p.quarantine[a.ID] = p.now + a.k.sup.Quarantine
	p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonStopped, nil) })
	a.deactWant = true
}

func (p *partition) setOverfull(a *act, full bool) {
	if a.overfull == full {
		return
	}
	a.overfull = full
	p.ovMu.Lock()
	if full {
		p.ov[a.ID] = struct{}{}
	} else {
		delete(p.ov, a.ID)
	}
	p.ovN.Store(int32(len(p.ov)))
	p.ovMu.Unlock()
}

// overfull reports, for a sender, whether id's backlog is known to be full.
// It costs one atomic load while no grain of the partition is full.
func (p *partition) overfull(id grain.ID) bool {
	if p.ovN.Load() == 0 {
		return false
	}
	p.ovMu.Lock()
	_, full := p.ov[id]
	p.ovMu.Unlock()
	return full
}

// control handles one control message.
func (p *partition) control(w *worker, c ctl) bool {
	switch c.op {
	case opTurnDone:
		var first *queues.Envelope
		if c.first.Msg != nil {
			first = &c.first
		}
		p.finish(c.a, c.res, first)
	case opIdleTick:
		p.collectIdle()
	case opRestart:
		if cur, ok := p.dir.Get(c.a.ID, c.a.ID.Hash()); ok && cur == c.a && c.a.State() == activation.Backoff {
			if p.mode == modeRunning || c.a.Mailbox.Len() > 0 {
				_ = c.a.Transition(activation.Activating)
			} else {
				c.a.deactWant = true
			}
			p.makeReady(c.a)
		}
	case opTimer:
		return p.fire(w, c)
	case opShutdown:
		if p.mode == modeRunning {
			p.mode = modeDraining
			p.dir.All(func(_ grain.ID, a *act) bool { p.stopTimers(a); return true })
		}
	case opClose:
		p.mode = modeClosing
		p.closeAll()
	}
	return true
}

// collectIdle deactivates the grains whose idle deadline passed.
func (p *partition) collectIdle() {
	p.now = p.s.since()
	exp := p.wheel.Advance(p.now, p.expired[:0])
	for _, e := range exp {
		a := e.Value
		switch {
		case a.State() != activation.Active || a.busy() || a.Mailbox.Len() > 0 || a.deactWant:
			p.touch(a)
		case a.keepUntil() > p.now:
			p.wheel.Touch(&a.idle, a.keepUntil())
		default:
			a.deactWant = true
			p.makeReady(a)
		}
	}
	clear(exp)
	p.expired = exp[:0]
	for id, until := range p.quarantine {
		if until <= p.now {
			delete(p.quarantine, id)
		}
	}
}

// stopped advances a shutdown or close, and reports whether the partition
// has finished: nothing queued, nothing active, no turn running.
func (p *partition) stopped() bool {
	if p.q.Len() > 0 {
		return false
	}
	if p.mode == modeDraining {
		p.dir.All(func(_ grain.ID, a *act) bool {
			if !a.busy() && a.Mailbox.Len() == 0 && !a.inReady {
				switch a.State() {
				case activation.Active, activation.Backoff:
					a.deactWant = true
					p.makeReady(a)
				}
			}
			return true
		})
	}
	if p.dir.Len() > 0 || p.inflight > 0 || p.rhead < len(p.ready) {
		return false
	}
	close(p.done)
	return true
}

// closeAll dead-letters everything the partition holds and forgets every
// activation that runs no turn. Activations with a turn running go when it
// finishes.
func (p *partition) closeAll() {
	for {
		env, ok := p.batch.Pop()
		if !ok {
			break
		}
		p.s.deadLetter(env, grain.ReasonShutdown, nil)
	}
	var all []*act
	p.dir.All(func(_ grain.ID, a *act) bool { all = append(all, a); return true })
	for _, a := range all {
		p.stopTimers(a)
		p.mbDrain(a, func(e queues.Envelope) { p.s.deadLetter(e, grain.ReasonShutdown, nil) })
		if !a.busy() {
			if a.State() == activation.Active || a.State() == activation.Backoff {
				_ = a.Transition(activation.Deactivating)
			}
			p.remove(a)
		} else {
			a.deactWant = false
		}
	}
}

// Mailbox changes go through these, to keep the backlog gauge exact.

func (p *partition) mbPush(a *act, env queues.Envelope) {
	a.Mailbox.Push(env)
	p.backlog.Add(1)
}

func (p *partition) mbPop(a *act) (queues.Envelope, bool) {
	env, ok := a.Mailbox.Pop()
	if ok {
		p.backlog.Add(-1)
	}
	return env, ok
}

func (p *partition) mbDrain(a *act, f func(queues.Envelope)) {
	p.backlog.Add(-int64(a.Mailbox.Len()))
	a.Mailbox.Drain(f)
}
