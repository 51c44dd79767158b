package silo

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Deadlocks across call chains.
//
// A call that would wait on a grain already waiting in its own chain fails
// before it is sent (Silo.Ask). Two chains can still close a cycle: A's
// turn calls B while B's turn, on another chain, calls A — each ask waits
// in the other's mailbox, and without help both wait for their deadline
// (30 s by default, as in Orleans, which does not detect this either).
//
// The silo keeps a wait-for graph of grains: an edge G → H while a turn of
// the non-reentrant grain G waits on its one call, to H — or while the
// OnActivate of a reentrant G does, since a grain lets nothing in while it
// activates (waitCall.hook). A stateless worker's activations share an
// identity: each one's wait is an edge under a key of its own
// (workerWaitKey), and an ask queued behind one records its partition
// (Request.SetQueuedAt), by which a walk finds it; its path keeps the
// keys too (step), so that a cycle through two activations of one
// identity is told from a loop. A cycle can only
// close when an ask is queued behind a busy grain (any other last step lets
// the ask run), so that is where the owner looks: from the grain the ask is
// queued behind, it follows the edges; if they lead back to the ask's own
// caller, and no ask on the way would be let in (a reentrant kind, a
// WithMayInterleave predicate, call-chain reentrancy), every turn in the
// cycle waits for the next and none can end. The newest ask, the one that
// closed the cycle, fails at once with ErrCallCycle (a dead letter, reason
// deadlock); its caller goes on, and the others' calls complete.
//
// The walk reads each edge at a different moment, so before it reports a
// cycle it checks again that none of the asks on it has been answered or
// given up. Both marks are set once and never cleared, and an answer is
// marked before its caller can see it: asks all found pending in that second
// pass were all pending at its first read, when every one waited on the
// next — a deadlock, not a picture of one. A grain with several calls
// out (a fan-out from its turn, interleaved turns) is stuck if one of its
// turns is, and a turn if every call of it is (walk); while one call is
// merely slow, the turn may go on at its reply — no verdict — and since no
// new ask marks that call's end, the end itself does: the owners behind
// which the turn's calls left wait walk again from them, and then the
// turn's own from the asks behind it, and those of the grains on its call
// chain from the asks behind them (Silo.endWait), failing one that
// closes a cycle. A turn that took
// its first reply and goes on is not stuck, but its calls left cannot be
// answered before it ends, when their ctx ends with it: failed or dropped
// as expired, each is one dead letter either way. An ask let in beside a
// waiting turn is followed into the calls its own turn waits on
// (walk.within), and a grain met again along another branch is not
// walked again (walk.memos). Anything the walk cannot
// be sure of (two grains of one hash with calls out, a cycle past
// maxCycle grains looked at) ends it with no verdict: the ask waits, as
// before.
// OnDeactivate's calls are edges too — a grain lets nothing in while it
// deactivates, whatever its kind (turnInfo.waitKey) — until the silo gives
// up on a hook that overran its timeout: what waited for the grain then
// runs on a fresh activation, which does not wait for the old hook, and
// the hook's calls are edges no more (waitShard.dropHook).

// breakDeadlock fails env, an ask from a grain's turn about to wait behind
// its busy target, if it closes a cycle, and reports whether it did. Owners
// of two partitions can each find the same cycle at once, from its two
// newest asks; the verdict is taken again under a lock of the silo's, and
// failing an ask marks it answered, so only one of them is failed. The lock
// is taken only when a cycle was seen.
func (s *Silo) breakDeadlock(env *queues.Envelope, at *partition) bool {
	if s.closesCycle(env, at) == nil {
		return false
	}
	s.deadlockMu.Lock()
	defer s.deadlockMu.Unlock()
	cycle := s.closesCycle(env, at)
	if cycle == nil {
		return false
	}
	s.deadLetter(*env, grain.ReasonDeadlock, &grain.CallCycleError{Chain: cycle})
	return true
}

// endWait records that the call req of a, made in partition p under key
// h (turnInfo.waitKey), is over. If its turn has other calls still out —
// a fan-out — and a lets nothing in while it waits, a walk through a that
// could not conclude while req was out, the turn maybe going on at its
// reply, may conclude now, and no new ask would take it: the owners
// behind whose activations those calls may wait are asked, one after
// another, to walk again from them (partition.rewalk) — a walk from any
// call of the turn looks at all of them (walk.callerWaits) — and if none
// closes a cycle (each may be running in its target, whose turn waits on
// another grain), a's owner walks again from the asks that wait behind a
// (partition.rewalkBehind), and, if none closes one, the owners of the
// grains on the turn's call chain from those behind them, whose turns
// wait on a through calls running in it (partition.rewalkUp): a cycle
// through a's stuck turn runs through one of them. The turn's own calls
// come first: a turn that took its
// first reply and goes on is not stuck, though a walk cannot tell it from
// one that waits for every reply, and failing a call it left costs no one
// else anything; the asks behind it are walked only when none of its
// calls closes a cycle.
func (s *Silo) endWait(p *partition, a *act, h uint64, req *queues.Request) {
	// No buffer: most calls' ends leave nothing, and a fan-out's calls
	// left go on with the control message.
	left := p.waits.end(h, req, nil)
	if len(left) == 0 || !left[0].hook && !s.holdsWhileWaiting(a.ID) && left[0].askOf() == nil {
		// Nothing left; or a grain that lets others in while it waits, in
		// a turn no one waits for (a reentrant grain's turn that handles an
		// ask is waited for by its caller: walk.within).
		return
	}
	left = slices.DeleteFunc(left, func(c waitCall) bool { return c.req.Resolved() || c.req.Abandoned() })
	if len(left) > 0 {
		var up queues.Chain
		if r := left[0].askOf(); r != nil {
			up = r.Chain
		}
		s.rewalkNext(ctl{op: opRewalk, a: a, ahead: p.idx, calls: left, up: up})
	}
}

// rewalkNext passes c, a walk again after a call of a fan-out of c.a's
// ended (Silo.endWait), on to the owner behind whose activation the next
// of c.calls may wait, or, with none left, to c.a's owner (partition
// c.ahead).
func (s *Silo) rewalkNext(c ctl) {
	for len(c.calls) > 0 {
		call := c.calls[0]
		c.calls = c.calls[1:]
		part, _, ok := s.waitsAt(call.target, call.thash, call.req)
		if !ok {
			continue // not queued behind an activation: its own walk is to come
		}
		c.first = queues.Envelope{Target: call.target, Hash: call.thash, Request: call.req}
		s.parts[part].q.PushControl(c)
		return
	}
	c.first = queues.Envelope{}
	s.parts[c.ahead].q.PushControl(c)
}

// rewalk walks again from call, an ask whose caller's turn is down to it
// and maybe others (Silo.endWait), if it waits here in its busy target's
// mailbox, and reports whether it failed it: failed, it leaves the
// mailbox, so that it is one dead letter, not a second one (expired)
// when its turn would come. An ask not queued yet is walked as it is
// (enqueue); one run or answered already closes no cycle.
func (p *partition) rewalk(call queues.Envelope) bool {
	req := call.Request
	a, ok := p.dir.Get(call.Target, call.Hash)
	if !ok || !a.busy() || req.Resolved() || req.Abandoned() {
		return false
	}
	at := a.Mailbox.Find(func(e *queues.Envelope) bool { return e.Request == req })
	if at == nil {
		return false
	}
	if env := *at; !p.s.breakDeadlock(&env, p.workerAt(a)) {
		return false
	}
	p.popAsk(a, req)
	return true
}

// rewalkUp walks again behind c.a, or, with none, behind the grain
// c.first names, and if that fails no ask, passes c on to the owner of
// the next grain of c.up: the turns of a grain on a's turn's call chain
// wait on a through a call that runs in it, and a cycle through a's stuck
// turn may be closed by an ask behind one of them as well as behind a.
func (p *partition) rewalkUp(c ctl) {
	a := c.a
	if a == nil {
		a, _ = p.dir.Get(c.first.Target, c.first.Hash)
	}
	if a != nil && p.rewalkBehind(a) {
		return
	}
	s := p.s
	for len(c.up) > 0 {
		l := c.up[len(c.up)-1]
		c.up = c.up[:len(c.up)-1]
		if l.Silo != s.incarnation || s.isWorker(l.ID) {
			continue // another silo's grain; or a stateless identity's, whose activation is not known
		}
		h := l.ID.Hash()
		c.a, c.first = nil, queues.Envelope{Target: l.ID, Hash: h}
		s.parts[s.locator.LocateHash(h).Partition].q.PushControl(c)
		return
	}
}

// rewalkBehind walks again from each ask that waits behind a, whose turn
// is down to calls that closed no cycle (Silo.endWait), fails those
// that close one, and reports whether it failed any. At most maxCycle
// asks are walked: a cycle needs one.
func (p *partition) rewalkBehind(a *act) bool {
	if cur, ok := p.dir.Get(a.ID, a.ID.HashWithKind(a.k.nameHash)); !ok || cur != a || !a.busy() {
		return false
	}
	var asks []queues.Envelope
	a.Mailbox.Find(func(e *queues.Envelope) bool {
		if e.Request != nil && len(asks) < maxCycle {
			asks = append(asks, *e)
		}
		return false
	})
	failed := false
	for i := range asks {
		if p.s.breakDeadlock(&asks[i], p.workerAt(a)) {
			p.popAsk(a, asks[i].Request)
			failed = true
		}
	}
	return failed
}

// popAsk takes req, an ask failed where it waited in a's mailbox, out of it.
func (p *partition) popAsk(a *act, req *queues.Request) {
	env, _ := a.Mailbox.PopFirst(func(e *queues.Envelope) bool { return e.Request != req })
	p.mbPopped(a, &env)
}

// waitCall is one outstanding call of a grain.
type waitCall struct {
	req    *queues.Request
	target grain.ID
	thash  uint64 // target's hash
	letIn  bool   // the target lets req in while it waits (WithMayInterleave)
	// hook: the waiting grain lets nothing in while it waits — it is in
	// OnActivate or OnDeactivate (turnInfo.waitKey), or an interleaving
	// grain being stopped (actExtra.held), what waits for it waiting for
	// every turn of it to end — but (activating, or stopped) calls back on
	// its own chain
	hook bool
	// turn: the turn that made the call, which tells a turn's several
	// calls (a fan-out) from several turns' (stuckCalls)
	turn *turnInfo
}

// askOf returns the ask whose turn made the call, or nil: a tell's, a
// tick's, a hook's without a first message. (Set before the turn began,
// and never changed: an ask's turn has a turnInfo of its own.)
func (c *waitCall) askOf() *queues.Request {
	if c.turn == nil {
		return nil
	}
	return c.turn.req
}

// waitEdge is a grain's outstanding calls: the first in line, the others
// (a fan-out, interleaved turns) in more, which is nil for most grains —
// an edge allocates nothing. Kept exactly, so that when a grain is down
// to one call again, the walk knows which.
type waitEdge struct {
	id grain.ID // the waiting grain (the map's key is its hash)
	waitCall
	more []waitCall
	// mixed: two grains of one hash share the entry, which then knows
	// neither (the walk stops there) until their calls are all over
	mixed bool
}

// one reports whether the edge is id's one call out, which a walk follows.
func (e *waitEdge) one(id grain.ID) bool { return e.id == id && !e.mixed && len(e.more) == 0 }

// waitShard holds the edges of one partition's grains, by the hash of the
// waiting grain's identity. Safe for concurrent use.
type waitShard struct {
	mu sync.Mutex
	m  map[uint64]waitEdge
}

// start records that a turn of id (whose hash is h) waits on req, to
// target (whose hash is th); letIn, that target lets req in while it waits;
// hook, that id lets nothing in while it waits (waitCall.hook), as it does
// too once held is set (nil: never).
func (w *waitShard) start(id grain.ID, h uint64, req *queues.Request, target grain.ID, th uint64, letIn, hook bool, held *atomic.Bool, turn *turnInfo) {
	w.mu.Lock()
	if turn != nil && turn.deact != nil && turn.deact.givenUp {
		w.mu.Unlock()
		return // an OnDeactivate given up on: the grain does not wait for it
	}
	if w.m == nil {
		w.m = make(map[uint64]waitEdge)
	}
	c := waitCall{req: req, target: target, thash: th, letIn: letIn, hook: hook, turn: turn}
	if held != nil && held.Load() { // under the lock hold takes
		c.hook = true
	}
	if e, ok := w.m[h]; ok {
		e.mixed = e.mixed || e.id != id
		e.more = append(e.more, c)
		w.m[h] = e
	} else {
		w.m[h] = waitEdge{id: id, waitCall: c}
	}
	w.mu.Unlock()
}

// dropHook records that the silo gave up on d, the OnDeactivate of the
// grain whose hash (or activation's key, workerWaitKey) is h: the grain
// is gone, and its next activation does not wait for the hook, whose
// calls out, and those it makes later (start reads givenUp), are no edges
// of it.
func (w *waitShard) dropHook(h uint64, d *deactHook) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d.givenUp = true
	e, ok := w.m[h]
	if !ok {
		return
	}
	calls := slices.DeleteFunc(append([]waitCall{e.waitCall}, e.more...), func(c waitCall) bool {
		return c.turn != nil && c.turn.deact == d
	})
	if len(calls) == 0 {
		delete(w.m, h)
		return
	}
	e.waitCall, e.more = calls[0], calls[1:]
	if len(e.more) == 0 {
		e.more = nil
	}
	w.m[h] = e
}

// hold records that id (whose hash is h), an interleaving grain, lets
// nothing in from now on but calls back on its waiting turns' chains (it
// is being stopped): its calls out now, if any, and those it makes later
// (start reads held) wait as an OnActivate's do (waitCall.hook).
func (w *waitShard) hold(id grain.ID, h uint64, held *atomic.Bool) {
	w.mu.Lock()
	held.Store(true)
	if e, ok := w.m[h]; ok && e.id == id && !e.mixed {
		e.hook = true
		for i := range e.more {
			e.more[i].hook = true
		}
		w.m[h] = e
	}
	w.mu.Unlock()
}

// end records that the call req of the grain whose hash is h is over, and
// returns, appended to left, the calls of the same turn still out: a walk
// through the grain that could not conclude while req was out (the turn
// might have gone on at its reply) may conclude now (Silo.endWait).
func (w *waitShard) end(h uint64, req *queues.Request, left []waitCall) []waitCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	if !ok {
		return left
	}
	last := len(e.more) - 1
	var gone waitCall
	if e.req == req {
		if last < 0 {
			delete(w.m, h)
			return left
		}
		gone = e.waitCall
		e.waitCall, e.more[last] = e.more[last], waitCall{}
		e.more = e.more[:last]
	} else {
		for i := range e.more {
			if e.more[i].req == req {
				gone = e.more[i]
				e.more[i], e.more[last] = e.more[last], waitCall{}
				e.more = e.more[:last]
				break
			}
		}
	}
	if len(e.more) == 0 {
		e.more = nil // mixed stays: the call left may be the other grain's
	}
	w.m[h] = e
	if gone.req == nil || e.mixed {
		return left
	}
	if e.turn == gone.turn {
		left = append(left, e.waitCall)
	}
	for _, c := range e.more {
		if c.turn == gone.turn {
			left = append(left, c)
		}
	}
	return left
}

// edge returns the outstanding call of id (whose hash is h), if it has
// exactly one, its target, and whether the target lets it in while it waits.
func (w *waitShard) edge(id grain.ID, h uint64) (req *queues.Request, target grain.ID, th uint64, letIn bool) {
	w.mu.Lock()
	if e, ok := w.m[h]; ok && e.one(id) {
		req, target, th, letIn = e.req, e.target, e.thash, e.letIn
	}
	w.mu.Unlock()
	return req, target, th, letIn
}

// hookWaits reports whether id (whose hash is h) is a grain that lets
// nothing in while it waits (waitCall.hook): every call it has out is a
// hook's, or made while it is being stopped — one, or several (a hook
// that fans out, a stopping grain's several turns).
func (w *waitShard) hookWaits(id grain.ID, h uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	return ok && e.allHook(id)
}

// leaving reports whether id (whose hash is h) waits in its OnDeactivate,
// on its way out: it lets nothing in, not even a call back on the hook's
// own chain (callsBackWaitingTurn).
func (w *waitShard) leaving(id grain.ID, h uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	if !ok || e.id != id || e.mixed {
		return false
	}
	return e.turn != nil && e.turn.deact != nil ||
		slices.ContainsFunc(e.more, func(c waitCall) bool { return c.turn != nil && c.turn.deact != nil })
}

// allHook reports whether every call of the edge is id's, and a hook
// call (waitCall.hook): made in OnActivate or OnDeactivate, or while id
// was being stopped, or marked by the Stop. (A call a goroutine of an
// earlier turn still has out is not: what waits for id may wait for that
// turn's end only.)
func (e *waitEdge) allHook(id grain.ID) bool {
	if e.id != id || e.mixed || !e.hook {
		return false
	}
	for _, c := range e.more {
		if !c.hook {
			return false
		}
	}
	return true
}

// stuckCalls returns the calls out of id (whose hash is h), if it has
// several and lets nothing in while it waits: blocks, that its kind does
// not (holdsWhileWaiting); or every call is a hook call (allHook). What
// waits for it waits for all its turns.
func (w *waitShard) stuckCalls(id grain.ID, h uint64, blocks bool) []waitCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	if !ok || len(e.more) == 0 || e.id != id || e.mixed || !blocks && !e.allHook(id) {
		return nil
	}
	return append([]waitCall{e.waitCall}, e.more...)
}

// turnCalls returns the calls out of id (whose hash, or activation's key,
// is h) that the turn handling req made: req, let in beside id's waiting
// turn, runs, and waits on them.
func (w *waitShard) turnCalls(id grain.ID, h uint64, req *queues.Request) []waitCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	if !ok || e.id != id || e.mixed {
		return nil
	}
	var calls []waitCall
	if e.askOf() == req {
		calls = append(calls, e.waitCall)
	}
	for _, c := range e.more {
		if c.askOf() == req {
			calls = append(calls, c)
		}
	}
	return calls
}

// calls reports whether req is a call out of id, whose hash (or
// activation's key, workerWaitKey) is h.
func (w *waitShard) calls(id grain.ID, h uint64, req *queues.Request) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	if !ok || e.id != id {
		return false
	}
	return e.req == req || slices.ContainsFunc(e.more, func(c waitCall) bool { return c.req == req })
}

// blocksWhileWaiting reports whether id's waits close deadlocks: its kind
// lets nothing in while its turns wait (holdsWhileWaiting), or it is a
// reentrant grain waiting in its OnActivate.
func (s *Silo) blocksWhileWaiting(id grain.ID) bool {
	if s.holdsWhileWaiting(id) {
		return true
	}
	h := id.Hash()
	return s.waitsOf(h).hookWaits(id, h)
}

// holdsWhileWaiting reports whether id's kind lets no ask in while a turn
// waits on a call (unless its WithMayInterleave predicate takes the ask):
// it is not reentrant. A reentrant grain never closes a deadlock.
func (s *Silo) holdsWhileWaiting(id grain.ID) bool {
	k := s.kinds[id.Kind()]
	return k != nil && !k.reentrant
}

// isWorker reports whether id is a stateless worker's, whose activations
// share it: their waits are edges under keys of their own (workerWaitKey).
func (s *Silo) isWorker(id grain.ID) bool {
	k := s.kinds[id.Kind()]
	return k != nil && k.workers > 1
}

// waitsAt returns where req, a call to target (whose hash is th), waits:
// the partition whose shard holds the wait of the activation it waits
// for, and that wait's key — a stateless worker's activation found by
// where req was queued (Request.QueuedAt), and ok false while that is not
// known.
func (s *Silo) waitsAt(target grain.ID, th uint64, req *queues.Request) (part int, key uint64, ok bool) {
	if !s.isWorker(target) {
		return s.locator.LocateHash(th).Partition, th, true
	}
	if part, ok = req.QueuedAt(); !ok || part >= len(s.parts) {
		return 0, 0, false
	}
	return part, workerWaitKey(th, part), true
}

// waitsOf returns the shard holding the edge of the grain whose hash is h:
// its partition's.
func (s *Silo) waitsOf(h uint64) *waitShard {
	return &s.parts[s.locator.LocateHash(h).Partition].waits
}

// maxCycle bounds the walk, in grains looked at (walk.steps): longer
// cycles are left to the calls' deadlines.
const maxCycle = 64

// closesCycle reports the cycle that env, an ask from a grain's turn about to
// wait behind its busy target, would close — the grains in call order, from
// its caller back to it — or nil; at is the partition of the target's
// activation if the target is a stateless worker's, else nil. A stateless
// worker's activations share an identity, and their waits are kept by
// activation (workerWaitKey): further on, the walk finds the activation an
// ask to one waits behind by where the ask was queued (Request.QueuedAt),
// and stops where that is not known. A reentrant grain's waits, recorded
// too, are read only where it lets nothing in — it activates, or is being
// stopped, which its edges say (waitCall.hook: the Stop marks them in the
// owner, before any message sent after it arrives) — and nowhere else: the
// owner lets an ask in once a turn waits, which the edge may show before
// the owner knows it.
func (s *Silo) closesCycle(env *queues.Envelope, at *partition) []grain.ID {
	caller := env.Sender()
	shut := s.waitsOf(env.Hash).hookWaits(env.Target, env.Hash) // the target lets nothing in while it waits
	if caller.IsZero() || env.Meta.MayInterleave && !shut ||
		!s.blocksWhileWaiting(caller) && len(env.Request.Chain) < 2 {
		// No caller to wait; or env may go in as soon as its target has
		// room for it; or a caller that lets in whatever comes, and whose
		// turn no one waits for: a tell's, a tick's. (A reentrant caller's
		// turn that handles an ask is answered only once env is: a cycle
		// may run through it, which the walk finds going into it,
		// walk.within.)
		return nil
	}
	if !shut && !s.holdsWhileWaiting(env.Target) {
		return nil // a reentrant target lets env in once a turn of it waits
	}
	shard, key := s.waitsOf(env.Hash), env.Hash
	if at != nil {
		shard, key = &at.waits, workerWaitKey(env.Hash, at.idx)
	}
	// w.stuck starts nil: it grows only on a branch found stuck, and a
	// buffer of this frame's would be moved to the heap on every walk (the
	// walk's methods recurse, and escape analysis gives up on them).
	w := walk{s: s, env: env, caller: caller}
	if !s.isWorker(caller) {
		// Its wait is under its identity's hash; a stateless worker's
		// activation is found where the walk reaches one with env's
		// request out (walk.isCaller).
		w.callerShard, w.callerKey = s.waitsOf(caller.Hash()), caller.Hash()
	}
	// On the stack while the walk is short: most end at the first grain.
	var pathBuf [8]step
	path := append(pathBuf[:0], step{id: caller, key: w.callerKey}, step{id: env.Target, key: key})
	cycle, _ := w.from(env.Target, shard, key, path)
	if cycle == nil {
		return nil
	}
	for _, r := range w.stuck { // the second look (see above)
		if r.Resolved() || r.Abandoned() {
			return nil
		}
	}
	ids := make([]grain.ID, len(cycle))
	for i, st := range cycle {
		ids[i] = st.id
	}
	return ids
}

// step is a grain on a walk's path, with the key of its wait in its
// shard: a stateless identity's activations share the identity, each
// waiting under a key of its own (workerWaitKey), and a cycle may pass
// through two of them.
type step struct {
	id  grain.ID
	key uint64
}

// walk is one deadlock walk (closesCycle): from env's target along the
// calls its turns wait on, back to env's caller.
//
// A grain with several calls out — a fan-out from its turn, interleaved
// turns, a stopping grain's several turns — lets nothing in while it
// waits (unless it is a reentrant grain that is not held: then it is no
// step of a walk at all), so what waits for it waits for all its turns,
// and one stuck turn is enough; a turn is stuck only if every call it
// made is (a fan-out may wait for its first reply only). A call is stuck
// if it leads back to env's caller — a cycle — or to a grain already on
// the way there, which is stuck if the rest of the walk finds it so (a
// loop: on its own it is no verdict, as a cycle env's caller is not on
// is none of env's doing). The path tells a stateless identity's
// activations apart by the keys of their waits. Each ask on a stuck branch
// is kept for the second look (walk.stuck), and a branch found not stuck
// takes its own back.
//
// Grains that fan out to each other are reached again and again, along
// other branches: what the walk found of a grain is remembered (walk.memos)
// — that it is free, which holds whatever the path; that it is stuck in a
// loop of its own; or that it is stuck if a grain on the path is, which
// holds while that grain is still where it was on the path — so that a
// tangle of a few grains costs a step a call, not a step a route through
// it (four grains fanning out to each other took more than maxCycle).
type walk struct {
	s      *Silo
	env    *queues.Envelope
	caller grain.ID
	steps  int // grains looked at (from, within), bounded by maxCycle, across branches too
	// stuck: the asks the verdict rests on, which the second look reads
	stuck []*queues.Request
	// callerShard, callerKey: where env's caller's wait is (isCaller);
	// nil until found, for a stateless worker's activation
	callerShard *waitShard
	callerKey   uint64
	// siblings: the caller's other calls of env's turn are being looked
	// at (callerWaits): a branch back to the caller is a loop, not
	// another look at its calls
	siblings bool
	// memos: what the walk found of the grains it left (see above);
	// entered: for each place on the path, the number of the look at the
	// grain there (from), which a memo that rests on it names; looks
	// counts them
	memos   []memo
	entered [maxCycle + 2]uint32
	looks   uint32
	// waited: what turnWaits found of env's turn's other calls, once it
	// has looked, and the asks it rests on: a tangle reaches the caller
	// along many branches
	waited     waitedAs
	waitedAsks []*queues.Request
}

// waitedAs is what a walk found of env's turn's other calls (turnWaits).
type waitedAs uint8

const (
	notLooked waitedAs = iota
	waitedStuck
	waitedFree
)

// enter begins a look at the grain at place d on the path: what is found
// resting on it names this look (walk.entered).
func (w *walk) enter(d int) {
	w.looks++
	w.entered[d] = w.looks
}

// settled is low, what the walk found of the grain at place d, as it
// leaves it: a loop back to that grain at most is one of its own, stuck
// whatever the path.
func settled(low, d int) int {
	if low != free && low >= d {
		return loopClosed
	}
	return low
}

// What a walk found of a grain, a turn or a call, short of a cycle back to
// env's caller (low): free, or stuck in a loop closed within it
// (loopClosed), or, any other value, stuck if the grain at that place on
// the path is (a loop back to it).
const (
	free       = -1
	loopClosed = math.MaxInt
)

// memo is what a walk found of a grain it left: low (free, loopClosed, or
// the place on the path of the grain it is stuck with, whose look was
// look), and the asks of the stuck branch, for the second look.
type memo struct {
	at    step
	low   int
	look  uint32
	asks  []*queues.Request
	since int // len(walk.memos) when the look at it began
}

// from follows the calls of cur, whose wait is in shard under key: its one
// call; or, with several, each of its turns, one stuck being enough, a
// turn being stuck if every call it made is. path ends with cur; the
// branches do not share it (a full slice's append copies). It returns the
// cycle back to env's caller, or what it found of cur (low).
func (w *walk) from(cur grain.ID, shard *waitShard, key uint64, path []step) (cycle []step, low int) {
	d := len(path) - 1
	if d >= len(w.entered) {
		return nil, free // too long (maxCycle bounds it before this)
	}
	if low, ok := w.recall(path[d], d); ok {
		return nil, low
	}
	if w.steps++; w.steps > maxCycle {
		return nil, free // too long: the walk gives no verdict, and remembers nothing
	}
	w.enter(d)
	mark, since := len(w.stuck), len(w.memos)
	cycle, low, branched := w.follow(cur, shard, key, path)
	if cycle != nil {
		return cycle, 0
	}
	low = settled(low, d)
	if branched && w.steps <= maxCycle { // a grain with one call out is a step, not a tangle: most walks remember nothing
		w.remember(memo{at: path[d], low: low, look: w.entered[max(0, min(low, d))], since: since}, mark)
	}
	return nil, low
}

// follow is from, without the memos; branched reports that cur has
// several calls out.
func (w *walk) follow(cur grain.ID, shard *waitShard, key uint64, path []step) (cycle []step, low int, branched bool) {
	if req, next, nh, letIn := shard.edge(cur, key); req != nil {
		cycle, low = w.via(waitCall{req: req, target: next, thash: nh, letIn: letIn}, path)
		return cycle, low, false
	}
	calls := shard.stuckCalls(cur, key, w.s.holdsWhileWaiting(cur))
	path = path[:len(path):len(path)]
	looped := -1 // the first turn found stuck in a loop
	for i, c := range calls {
		if slices.ContainsFunc(calls[:i], func(d waitCall) bool { return d.turn == c.turn }) {
			continue // that turn's been looked at
		}
		mark := len(w.stuck)
		cycle, low := w.turnStuck(calls[i:], c.turn, path)
		if cycle != nil {
			return cycle, 0, true
		}
		w.stuck = w.stuck[:mark] // a loop turn's asks matter only if no turn closes a cycle
		if low != free && looped < 0 {
			looped = i
		}
	}
	if looped < 0 {
		return nil, free, len(calls) > 0 // cur's turns are not stuck on known calls
	}
	cycle, low = w.turnStuck(calls[looped:], calls[looped].turn, path) // its asks again
	return cycle, low, true
}

// recall returns what the walk found of at, now at place d on the path,
// if it still holds: free, or stuck in a loop of its own, always; stuck
// with a grain on the path, while that grain is still there, on the same
// look. The asks of a stuck branch join the walk's again.
func (w *walk) recall(at step, d int) (low int, ok bool) {
	for i := len(w.memos) - 1; i >= 0; i-- {
		m := &w.memos[i]
		if m.at != at {
			continue
		}
		if m.low == free {
			return free, true
		}
		if m.low == loopClosed || m.low < d && w.entered[m.low] == m.look {
			w.stuck = append(w.stuck, m.asks...)
			return m.low, true
		}
	}
	return 0, false
}

// remember keeps what the walk found of a grain it leaves, whose stuck
// branch's asks begin at w.stuck[mark]. A grain found free takes back the
// memos of loops made since its look began: they took it for stuck.
func (w *walk) remember(m memo, mark int) {
	if m.low == free {
		kept := w.memos[:m.since]
		for _, o := range w.memos[m.since:] {
			if o.low == free || o.low == loopClosed {
				kept = append(kept, o)
			}
		}
		w.memos = kept
	} else {
		m.asks = slices.Clone(w.stuck[mark:])
	}
	w.memos = append(w.memos, m)
}

// turnStuck reports whether turn, whose calls are among calls, is stuck:
// every call of it is; with the cycle one of them closes, if one does.
func (w *walk) turnStuck(calls []waitCall, turn *turnInfo, path []step) (cycle []step, low int) {
	mark := len(w.stuck)
	low = loopClosed
	for _, d := range calls {
		if d.turn != turn {
			continue
		}
		c, l := w.via(d, path)
		if c == nil && l == free {
			w.stuck = w.stuck[:mark]
			return nil, free // this call of the turn's may be answered: so may the turn
		}
		if cycle == nil {
			cycle = c
		}
		if c == nil {
			low = min(low, l)
		}
	}
	if cycle != nil {
		return cycle, 0
	}
	return nil, low
}

// via takes the step along c, a call of path's last grain: to its target,
// if the target lets c's ask in only once its own turns end.
func (w *walk) via(c waitCall, path []step) (cycle []step, low int) {
	s, req, next, nh := w.s, c.req, c.target, c.thash
	if w.steps > maxCycle || req.Resolved() || req.Abandoned() {
		return nil, free // too long; or the call is over, or given up on
	}
	part, key, ok := s.waitsAt(next, nh, req)
	if !ok {
		return nil, free // not known which of next's activations req waits behind
	}
	shard := &s.parts[part].waits
	at := step{id: next, key: key}
	if req.Interleave && !req.InLine() && !shard.leaving(next, key) ||
		(c.letIn || !s.holdsWhileWaiting(next)) && !shard.hookWaits(next, key) {
		// next lets req in while it waits: a call back on a waiting turn's
		// chain — unless it was put in line behind next's turns, the turn
		// on its chain gone, or next is on its way out — or one its kind
		// lets in (an activating grain lets nothing in).
		return w.within(req, shard, append(path, at))
	}
	path = append(path, at)
	switch {
	case next == w.caller && w.isCaller(shard, key) && w.siblings:
		low = 0 // env's caller, whose other calls are being looked at
	case next == w.caller && w.isCaller(shard, key):
		if !w.callerWaits(shard, key) {
			return nil, free // not stuck on env
		}
		cycle = slices.Clone(path)
	default:
		if i := slices.Index(path[1:len(path)-1], at); i >= 0 {
			low = i + 1 // stuck if the grain it came back to is
		} else if cycle, low = w.from(next, shard, key, path); cycle == nil && low == free {
			return nil, free
		}
	}
	w.stuck = append(w.stuck, req)
	return cycle, low
}

// within takes the step into req, an ask let in beside the waiting turn of
// path's last grain: it is answered once its own turn ends, which, if it
// runs and waits on calls (the grain's other turn waits on nothing it
// does), is once they are answered — stuck if every one of them is. Not
// begun, or waiting on nothing, it will be answered. One of those calls
// may be env itself: env's caller's turn was let in, and the walk has come
// back to it.
func (w *walk) within(req *queues.Request, shard *waitShard, path []step) (cycle []step, low int) {
	d := len(path) - 1
	at := path[d]
	calls := shard.turnCalls(at.id, at.key, req)
	if len(calls) == 0 || d >= len(w.entered) {
		return nil, free
	}
	if w.steps++; w.steps > maxCycle {
		return nil, free
	}
	own := slices.ContainsFunc(calls, func(c waitCall) bool { return c.req == w.env.Request })
	switch {
	case own && w.siblings:
		low = 0 // env's caller's turn, whose other calls are being looked at
	case own:
		if !w.turnWaits(calls, shard, at.key) {
			return nil, free // env's turn may go on at another call's reply
		}
		cycle = slices.Clone(path)
	default:
		w.enter(d) // a place on the path, as from's grains are
		if cycle, low = w.turnStuck(calls, calls[0].turn, path[:d+1:d+1]); cycle == nil && low == free {
			return nil, free
		}
		if cycle == nil {
			low = settled(low, d)
		}
	}
	w.stuck = append(w.stuck, req)
	return cycle, low
}

// callerWaits reports whether env's caller, whose wait is in shard under
// key, is stuck on env: env is its one call; or one of several, and every
// other call of env's turn is stuck too. Those are walked on a path of
// their own, from the caller: the places on the walk's path, and what the
// walk found resting on them, are put aside meanwhile.
func (w *walk) callerWaits(shard *waitShard, key uint64) bool {
	if own, _, _, _ := shard.edge(w.caller, key); own != nil {
		return own == w.env.Request
	}
	return w.turnWaits(shard.stuckCalls(w.caller, key, w.s.holdsWhileWaiting(w.caller)), shard, key)
}

// turnWaits reports whether the turn that made env, whose calls are among
// calls (the caller's, whose wait is in shard under key), is stuck on
// env: every other call of it is stuck too.
func (w *walk) turnWaits(calls []waitCall, shard *waitShard, key uint64) bool {
	i := slices.IndexFunc(calls, func(c waitCall) bool { return c.req == w.env.Request })
	if i < 0 {
		return false
	}
	switch w.waited {
	case waitedStuck:
		w.stuck = append(w.stuck, w.waitedAsks...)
		return true
	case waitedFree:
		return false
	}
	mark := len(w.stuck)
	entered := w.entered
	w.siblings, w.callerShard, w.callerKey = true, shard, key
	w.enter(0) // the caller, first on the siblings' path
	defer func() { w.siblings, w.entered = false, entered }()
	for _, d := range calls {
		if d.turn != calls[i].turn || d.req == w.env.Request {
			continue
		}
		if c, l := w.via(d, []step{{id: w.caller, key: key}}); c == nil && l == free {
			w.stuck = w.stuck[:mark]
			w.waited = waitedFree
			return false // the turn may have this call answered, and go on
		}
	}
	w.waited, w.waitedAsks = waitedStuck, slices.Clone(w.stuck[mark:])
	return true
}

// isCaller reports whether the wait in shard under key, of a grain of
// env's caller's identity, is env's caller's: a stateless worker's
// activations share an identity, and the one env is a call of is found
// where a walk reaches it first (callerShard).
func (w *walk) isCaller(shard *waitShard, key uint64) bool {
	if w.callerShard == nil {
		if !shard.calls(w.caller, key, w.env.Request) {
			return false // another activation, which the walk goes on through
		}
		w.callerShard, w.callerKey = shard, key
	}
	return shard == w.callerShard && key == w.callerKey
}

// workerWaitKey is the key of the wait of a stateless worker's activation
// in partition part, the identity's hash being h, in part's shard: its
// identity's hash would be shared with its other activations, in other
// partitions' shards (an odd multiplier keeps the keys of one identity's
// activations apart).
func workerWaitKey(h uint64, part int) uint64 {
	return h ^ uint64(part+1)*0x9e3779b97f4a7c15
}
