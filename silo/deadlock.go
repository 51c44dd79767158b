package silo

import (
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
// turns is, and a turn if every call of it is (walk, deadlockwalk.go: each
// grain read once, what is free settled for all); while one call is
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
// (walk.destOf). Anything the walk cannot be sure of (two grains of one
// hash with calls out, a grain past maxCycle grains looked at) is free:
// a verdict that rests on it is none, and the ask waits, as before.
// OnDeactivate's calls are edges too — a grain lets nothing in while it
// deactivates, whatever its kind (turnInfo.waitKey) — until the silo gives
// up on a hook that overran its timeout: what waited for the grain then
// runs on a fresh activation, which does not wait for the old hook, and
// the hook's calls are edges no more (waitShard.dropHook).

// breakDeadlock fails env, an ask from a grain's turn about to wait behind
// a, its busy target, if it closes a cycle, and reports whether it did.
// Owner only: the walk is p's (partition.walk). Owners
// of two partitions can each find the same cycle at once, from its two
// newest asks; the verdict is taken again under a lock of the silo's, and
// failing an ask marks it answered, so only one of them is failed. The lock
// is taken only when a cycle was seen.
func (p *partition) breakDeadlock(env *queues.Envelope, a *act) bool {
	s, at := p.s, p.workerAt(a)
	if s.closesCycle(&p.walk, env, at) == nil {
		return false
	}
	s.deadlockMu.Lock()
	defer s.deadlockMu.Unlock()
	cycle := s.closesCycle(&p.walk, env, at)
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
// call of the turn looks at all of them (walk.turnNode) — and if none
// closes a cycle (each may be running in its target, whose turn waits on
// another grain), a's owner walks again from the asks that wait behind a
// (partition.rewalkBehind), and then the owners of the grains on the
// turn's call chain from those behind them, whose turns wait on a
// through calls running in it (partition.rewalkUp): a cycle through a's
// stuck turn runs through one of them, and a tangle may hold several,
// each closed by an ask of its own. The turn's own calls
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
		// ask is waited for by its caller: walk.destOf).
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
	if env := *at; !p.breakDeadlock(&env, a) {
		return false
	}
	p.popAsk(a, req)
	return true
}

// rewalkUp walks again behind c.a, or, with none, behind the grain
// c.first names, and passes c on to the owner of the next grain of c.up:
// the turns of a grain on a's turn's call chain wait on a through a call
// that runs in it, and a cycle through a's stuck turn may be closed by an
// ask behind one of them as well as behind a. An ask failed behind one
// breaks its cycle, not the others: a's turn still waits (a tangle of
// fan-outs held several cycles through one stuck turn, and all but the
// first waited for their deadlines), and a walk behind the next grain,
// which reads the failed ask as answered, fails only an ask whose cycle
// is left. Which of a stateless identity's activations a turn of the
// chain runs in is not known: behind each of them in turn, then.
func (p *partition) rewalkUp(c ctl) {
	a := c.a
	if a == nil {
		a, _ = p.dir.Get(c.first.Target, c.first.Hash)
	}
	if a != nil {
		p.rewalkBehind(a)
	}
	s := p.s
	if c.a == nil && s.isWorker(c.first.Target) {
		if next, ok := s.nextWorkerPart(c.first.Target, c.first.Hash, p.idx); ok {
			s.parts[next].q.PushControl(c)
			return
		}
	}
	for len(c.up) > 0 {
		l := c.up[len(c.up)-1]
		c.up = c.up[:len(c.up)-1]
		if l.Silo != s.incarnation {
			continue // another silo's grain
		}
		h := l.ID.Hash()
		c.a, c.first = nil, queues.Envelope{Target: l.ID, Hash: h}
		s.parts[s.locator.LocateHash(h).Partition].q.PushControl(c) // a stateless identity's first activation's, if any
		return
	}
}

// nextWorkerPart returns the partition of the activation of id, a
// stateless identity whose hash is h, that follows the one in partition
// cur, if the identity may have one there.
func (s *Silo) nextWorkerPart(id grain.ID, h uint64, cur int) (int, bool) {
	k := s.kinds[id.Kind()]
	n := len(s.parts)
	base := s.locator.LocateHash(h).Partition
	i := (cur - base + n) % n
	if k == nil || i+1 >= k.workers {
		return 0, false
	}
	return s.workerPart(base, i+1).idx, true
}

// rewalkBehind walks again behind a, whose turn is down to calls that
// closed no cycle (Silo.endWait), and fails the asks waiting there that
// close one: one walk from a finds the turns stuck on it, and an ask
// behind a that one of them made is walked as its own (breakDeadlock).
func (p *partition) rewalkBehind(a *act) {
	h := a.ID.HashWithKind(a.k.nameHash)
	if cur, ok := p.dir.Get(a.ID, h); !ok || cur != a || !a.busy() {
		return
	}
	if a.Mailbox.Find(func(e *queues.Envelope) bool { return e.Request != nil && !e.Sender().IsZero() }) == nil {
		return // no ask behind a from a turn: none closes a cycle, and no walk is needed
	}
	shard, key := p.s.waitsOf(h), h
	if a.isWorker() {
		shard, key = &p.waits, workerWaitKey(h, p.idx)
	}
	stuck := p.walk.stuckBehind(p.s, step{id: a.ID, key: key}, shard, p.stuck[:0])
	p.stuck = stuck[:0]
	if len(stuck) == 0 {
		return
	}
	var asks []queues.Envelope
	a.Mailbox.Find(func(e *queues.Envelope) bool {
		if e.Request != nil && slices.Contains(stuck, e.Request) {
			asks = append(asks, *e)
		}
		return false
	})
	clear(stuck)
	for i := range asks {
		if p.breakDeadlock(&asks[i], a) {
			p.popAsk(a, asks[i].Request)
		}
	}
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
	// holds: the turn that made the call holds its grain's other messages
	// (holding.go: a WithMayInterleave grain's)
	holds bool
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

// waitShard holds the edges of one partition's grains, by the hash of the
// waiting grain's identity. Safe for concurrent use.
type waitShard struct {
	mu sync.Mutex
	m  map[uint64]*waitEdge
	// free: edges whose calls are over, for the next grain that waits
	// (edge). A waitEdge is 160 bytes, and a Go map allocates a value past
	// 128 bytes apart at each insert: kept in the map by value, it was
	// one allocation of every call between grains (156 bytes of
	// BenchmarkNestedCall's 646).
	free []*waitEdge
}

// keptEdges is how many spare edges a shard keeps (waitShard.free).
const keptEdges = 64

// edge returns a zeroed edge for a grain that starts to wait. w.mu held.
func (w *waitShard) edge() *waitEdge {
	if n := len(w.free); n > 0 {
		e := w.free[n-1]
		w.free[n-1] = nil
		w.free = w.free[:n-1]
		return e
	}
	return new(waitEdge)
}

// drop removes e, the edge of h, once its last call is over, and keeps it
// for the next if the shard has room. w.mu held.
func (w *waitShard) drop(h uint64, e *waitEdge) {
	delete(w.m, h)
	*e = waitEdge{} // its calls' requests and turns: held no longer
	if len(w.free) < keptEdges {
		w.free = append(w.free, e)
	}
}

// start records that a turn of id (whose hash is h) waits on req, to
// target (whose hash is th); letIn, that target lets req in while it waits;
// hook, that id lets nothing in while it waits (waitCall.hook), as it does
// too once held is set (nil: never); holds, that the turn holds id's other
// messages (waitCall.holds).
func (w *waitShard) start(id grain.ID, h uint64, req *queues.Request, target grain.ID, th uint64, letIn, hook bool, held *atomic.Bool, turn *turnInfo, holds bool) {
	w.mu.Lock()
	if turn != nil && turn.deact != nil && turn.deact.givenUp {
		w.mu.Unlock()
		return // an OnDeactivate given up on: the grain does not wait for it
	}
	if w.m == nil {
		w.m = make(map[uint64]*waitEdge)
	}
	c := waitCall{req: req, target: target, thash: th, letIn: letIn, hook: hook, holds: holds, turn: turn}
	if held != nil && held.Load() { // under the lock hold takes
		c.hook = true
	}
	if e, ok := w.m[h]; ok {
		e.mixed = e.mixed || e.id != id
		e.more = append(e.more, c)
	} else {
		e = w.edge()
		e.id, e.waitCall = id, c
		w.m[h] = e
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
		w.drop(h, e)
		return
	}
	e.waitCall, e.more = calls[0], calls[1:]
	if len(e.more) == 0 {
		e.more = nil
	}
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
			w.drop(h, e)
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

// placeCalls appends to buf, and returns, the calls out of id (whose
// hash, or activation's key, is h) that a walk follows, an ask waiting
// behind it: its one call; or, with several, every one, if it lets
// nothing in while it waits — blocks, that its kind does not
// (holdsWhileWaiting), or every call is a hook call (allHook) — and none
// if it lets asks in (it is no place of a walk then), or if the entry is
// another grain's or shared (mixed).
func (w *waitShard) placeCalls(id grain.ID, h uint64, blocks, oneHolds bool, buf []waitCall) []waitCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	if !ok || e.id != id || e.mixed || len(e.more) > 0 && !blocks && !e.allHook(id) {
		return buf
	}
	if oneHolds {
		// What waits there waits for the turn that holds it alone (and
		// for its hooks, or all of it while it is stopped: hook calls).
		keep := func(c *waitCall) bool { return c.hook || c.holds }
		if keep(&e.waitCall) {
			buf = append(buf, e.waitCall)
		}
		for i := range e.more {
			if keep(&e.more[i]) {
				buf = append(buf, e.more[i])
			}
		}
		return buf
	}
	return append(append(buf, e.waitCall), e.more...)
}

// turnCalls appends to buf, and returns, the calls out of id (whose
// hash, or activation's key, is h) that the turn handling req made: req,
// let in beside id's waiting turn, runs, and waits on them.
func (w *waitShard) turnCalls(id grain.ID, h uint64, req *queues.Request, buf []waitCall) []waitCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[h]
	if !ok || e.id != id || e.mixed {
		return buf
	}
	if e.askOf() == req {
		buf = append(buf, e.waitCall)
	}
	for _, c := range e.more {
		if c.askOf() == req {
			buf = append(buf, c)
		}
	}
	return buf
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
	k, _ := s.kindOf.get(kindName(&id), s.kinds) // a walk asks for each call it follows
	return k != nil && !k.reentrant
}

// oneHolds reports whether id's kind has one turn at a time hold its other
// messages (holding.go).
func (s *Silo) oneHolds(id grain.ID) bool {
	k, _ := s.kindOf.get(kindName(&id), s.kinds)
	return k != nil && k.oneHolds
}

// isWorker reports whether id is a stateless worker's, whose activations
// share it: their waits are edges under keys of their own (workerWaitKey).
func (s *Silo) isWorker(id grain.ID) bool {
	k, _ := s.kindOf.get(kindName(&id), s.kinds)
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

// maxCycle bounds the walk, in grains looked at (walk.reads): a grain
// past it is taken for free, and a cycle that runs through one is left to
// the calls' deadlines. It is what bounds a walk's cost: at 128, a walk
// through a fan-out of a thousand calls (BenchmarkDeadlockWalk/wide1000)
// costs what it did at 64 before a walk found its nodes by an index
// (walk.find), and one at 256 costs twice that.
const maxCycle = 128

// walkAgain is how many times closesCycle walks while what a walk's
// verdict rested on moves under it.
const walkAgain = 3

// closesCycle reports the cycle that env, an ask from a grain's turn about to
// wait behind its busy target, would close — the grains in call order, from
// its caller back to it — or nil, walked with w's buffers; at is the
// partition of the target's activation if the target is a stateless
// worker's, else nil. A stateless
// worker's activations share an identity, and their waits are kept by
// activation (workerWaitKey): further on, the walk finds the activation an
// ask to one waits behind by where the ask was queued (Request.QueuedAt),
// and takes it for free where that is not known. A reentrant grain's waits, recorded
// too, are read only where it lets nothing in — it activates, or is being
// stopped, which its edges say (waitCall.hook: the Stop marks them in the
// owner, before any message sent after it arrives) — and nowhere else: the
// owner lets an ask in once a turn waits, which the edge may show before
// the owner knows it.
func (s *Silo) closesCycle(w *walk, env *queues.Envelope, at *partition) []grain.ID {
	caller := env.Sender()
	shard, key := s.waitsOf(env.Hash), env.Hash
	if at != nil {
		shard, key = &at.waits, workerWaitKey(env.Hash, at.idx)
	}
	shut := shard.hookWaits(env.Target, key) // the target lets nothing in while it waits
	if caller.IsZero() || env.Meta.MayInterleave && !shut ||
		!s.blocksWhileWaiting(caller) && !s.isWorker(caller) && len(env.Request.Chain) < 2 {
		// No caller to wait; or env may go in as soon as its target has
		// room for it; or a caller that lets in whatever comes, and whose
		// turn no one waits for: a tell's, a tick's. (A reentrant caller's
		// turn that handles an ask is answered only once env is: a cycle
		// may run through it, which the walk finds going into it,
		// walk.destOf.) Not a stateless worker's activation: whether it
		// lets anything in — whether env is its OnDeactivate's call, say,
		// made while it lets nothing in — is in its wait under a key of
		// its own, in a partition env does not name; the walk finds it
		// there if a cycle runs through it.
		return nil
	}
	if !shut && !s.holdsWhileWaiting(env.Target) {
		return nil // a reentrant target lets env in once a turn of it waits
	}
	// A second look that finds an ask of the verdict answered or given up
	// on meanwhile — another owner failing a cycle of the same tangle —
	// gives no verdict; but a cycle of the tangle may be left, and no
	// event would walk again from env (a chaos storm's tangles stalled so):
	// walk again, from the graph as it is now, a few times at most.
	for range walkAgain {
		if cycle := w.run(s, env, step{id: env.Target, key: key}, shard); cycle != nil || !w.moved {
			return cycle
		}
	}
	return nil
}

// step is a grain a walk reads, with the key of its wait in its shard: a
// stateless identity's activations share the identity, each waiting under
// a key of its own (workerWaitKey), and a cycle may pass through two of
// them.
type step struct {
	id  grain.ID
	key uint64
}

// waitKeyOf returns the key under which the calls of a, an activation of
// p, are edges in p's shard: its identity's hash, or a stateless
// activation's key of its own (workerWaitKey). turnInfo.waitKey and halt
// must agree on it.
func (p *partition) waitKeyOf(a *act) uint64 {
	if a.k.workers > 1 {
		return workerWaitKey(a.ID.HashWithKind(a.k.nameHash), p.idx)
	}
	return a.ID.Hash()
}

// workerWaitKey is the key of the wait of a stateless worker's activation
// in partition part, the identity's hash being h, in part's shard: its
// identity's hash would be shared with its other activations, in other
// partitions' shards (an odd multiplier keeps the keys of one identity's
// activations apart).
func workerWaitKey(h uint64, part int) uint64 {
	return h ^ uint64(part+1)*0x9e3779b97f4a7c15
}
