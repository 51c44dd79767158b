package silo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Tell sends msg to the grain id and returns at once; the reply, if any, is
// dropped. A nil error means the message was queued: it will be handled or
// become a dead letter. Bad input is refused with a typed error before
// anything is queued: an invalid id, a nil message, an unknown kind, a silo
// not running (ErrSiloClosed), a grain known to be overloaded
// (ErrOverloaded). A ctx that has ended already refuses it too, with ctx's
// error (context.Canceled, context.DeadlineExceeded): a turn's tells once
// its caller gave up, say — or once the silo closed, which ends every
// turn's ctx: then the error matches ErrSiloClosed too. Tell waits only for room, until ctx ends, like a
// send on a full channel: in the grain's partition queue when it is full
// (Config.QueueCapacity), or in the grain's backlog when that is full while
// the grain's turns run (Config.MaxBacklog, WithMaxBacklog; see Overflow). A
// Tell refused for an overloaded grain is a dead letter as well (reason
// overload); one refused for anything else is not: its caller hears why, and
// nothing was sent.
//
// ctx bounds the send only. The handler's ctx does not end with it — the
// sender may be long gone when the turn runs — but ends when the silo
// closes; it carries none of ctx's values unless Config.Propagator carries
// some (a trace's span, say): put what the handler needs in the message.
// (Ask differs: its handler's ctx has the caller's values and deadline.)
//
// Called from a turn with the turn's ctx, the message carries the calling
// grain as its sender (unless the grain is another silo's), and while a
// Shutdown lets the work under way finish, it is taken (see Silo.Shutdown).
//
// id may be an observer's (NewObserver): the message goes into its buffer at
// once, or is refused at once — a full buffer, a closed observer — and never
// waits.
func (s *Silo) Tell(ctx context.Context, id grain.ID, msg any) error {
	p, k, h, err := s.admitSend(ctx, id, msg)
	if err != nil {
		if err == errObserverTarget || (err == grain.ErrSiloClosed && id.IsObserver()) {
			return s.tellObserver(ctx, id, msg, err)
		}
		return err
	}
	if k.workers > 1 {
		p.swQueued.Add(1) // at once: the next send's choice must see this one (stateless.go)
	}
	// Field by field: a composite literal is built in a temporary and then
	// copied, and the copy's 16-byte loads of the hash and message just
	// stored 8 bytes at a time stall on store forwarding (about 7 % of
	// tell's CPU in the profile).
	var env queues.Envelope
	env.Target, env.Hash, env.Msg = id, h, msg
	ti := turnFrom(ctx)
	if ti != nil && ti.w.p.s == s { // another silo's grain is no sender here: its ID names one of ours
		env.Meta = ti.a.senderMeta()
	}
	if k.takes(msg) {
		env.Meta = s.letInMeta(env.Meta)
	}
	if s.cfg.Propagator != nil {
		env.Msg = s.carry(ctx, msg)
	}
	if k.workers > 1 {
		_, err = s.pushWorker(ctx, p, &env, ti)
	} else {
		_, err = s.push(ctx, p, &env, ti)
	}
	return err
}

type reentryKey struct{}

// AllowCallChainReentrancy returns a ctx whose calls let their call chain
// re-enter the calling grain: if the grain called (or one it calls in turn)
// calls back into the caller, that nested call runs while the caller waits,
// instead of failing with ErrCallCycle. Use it on the ctx of a turn. A nil
// ctx gives nil, which the call it is passed to refuses with
// grain.ErrNilContext (context.WithValue would panic in the caller).
func AllowCallChainReentrancy(ctx context.Context) context.Context {
	if ctx == nil {
		return nil
	}
	return context.WithValue(ctx, reentryKey{}, true)
}

// Ask sends msg to the grain id and waits for the reply: the value and error
// its handler returned, a *grain.PanicError if it panicked, or an error
// naming why the message became a dead letter. It waits at most until ctx is
// done; with no deadline on ctx, Config.CallTimeout applies (or the kind's
// WithCallTimeout). A timeout is reported as a *grain.TimeoutError, and the
// message is never resent; if its turn had not begun when the caller gave
// up, it is not run either, but dropped as a dead letter with reason
// expired. The handler's ctx carries ctx's values (a trace id, say) and ends
// when the caller stops waiting.
//
// An ask is refused before anything is sent for what refuses a Tell (see
// Tell), a ctx that has ended already among it: context.Canceled, or a
// *grain.TimeoutError for a deadline past. Nothing was sent, so such a
// refusal is no dead letter; only one for an overloaded grain is one as
// well. Every error of an ended ctx, from Ask as from the rest of the silo,
// matches ctx's cause too if it was given one (context.WithCancelCause,
// WithTimeoutCause).
//
// Called from a turn with the turn's ctx, Ask detects call cycles (failing
// at once with a *grain.CallCycleError) and lets the partition serve other
// grains while the turn waits. Most code uses the typed Call instead.
func (s *Silo) Ask(ctx context.Context, id grain.ID, msg any) (any, error) {
	p, k, h, err := s.admitSend(ctx, id, msg)
	if err != nil {
		if err == errObserverTarget {
			return nil, fmt.Errorf("%w: %v", grain.ErrObserverAsk, id)
		}
		return nil, asTimeout(id, err) // a deadline past before it was sent is still a timeout
	}
	if k.workers > 1 {
		p.swQueued.Add(1) // at once, as in Tell
	}
	var env queues.Envelope // field by field, as in Tell
	env.Target, env.Hash, env.Msg = id, h, msg
	ti := turnForCall(ctx)
	if err := s.checkCallCtx(ti, id, msg); err != nil {
		unreserve(p, k)
		return nil, err
	}
	letIn := k.reentrant // whether id would let msg in while one of its turns waits
	if ti != nil && ti.w.p.s == s {
		env.Meta = ti.a.senderMeta()
	}
	if k.takes(msg) {
		letIn = true
		env.Meta = s.letInMeta(env.Meta)
	}
	var chain queues.Chain
	var ask *askCtx // a call from a turn's: made with its chain
	reenter := false
	if ti != nil {
		outer := ti.chain()
		if s.cfg.MaxCallDepth > 0 && len(outer) >= s.cfg.MaxCallDepth {
			unreserve(p, k)
			return nil, fmt.Errorf("%w: %v calling %v would make %d grains wait, past Config.MaxCallDepth",
				grain.ErrCallTooDeep, ti.a.ID, id, len(outer)+1)
		}
		_, allow := ctx.Value(reentryKey{}).(bool)
		// The calling grain may be another silo's (a turn of one silo
		// calling into another): its link says whose.
		link := queues.Link{ID: ti.a.ID, Silo: ti.w.p.s.incarnation, SiloName: ti.w.p.s.cfg.Name, AllowReentry: allow}
		ask, chain = chainedAsk(outer, link)
		if l, waiting := chain.Find(s.incarnation, id); waiting {
			// An OnDeactivate's grain, on its way out, lets nothing in —
			// not even a call back on the hook's own chain — and its next
			// activation waits for the hook (a stateless worker's other
			// activations excepted).
			// (The kind's count, not the activation's mark: its marks
			// are its owner's, written as the owner stops it, and this
			// is the hook's goroutine.)
			leaving := ti.deact != nil && id == ti.a.ID && ti.a.k.workers <= 1
			if !l.AllowReentry && !letIn || leaving {
				unreserve(p, k)
				return nil, chain.Cycle(s.incarnation, s.cfg.Name, id)
			}
			reenter = true
		}
	}
	if ask == nil {
		ask = &askCtx{}
	}
	ask.init(ctx, chain, p)
	req := &ask.req
	req.Interleave = reenter
	env.Request = req
	mayReenter := ti != nil && (chain[len(chain)-1].AllowReentry || ti.a.k.interleaves())
	var x *actExtra
	if mayReenter {
		// This call may be re-entered: say so before the request can reach
		// anyone (see docs/calls.md), and give the turn token up once it
		// is queued (queued, below).
		x = ti.a.extra()
		if ti.leaveToken(x, true) && ti.a.k.interleaves() {
			// Messages that came while no turn waited are in the mailbox:
			// the owner lets them in now (partition.flushMailbox).
			ti.w.p.q.PushControl(ctl{op: opWaiting, a: ti.a})
		}
		defer ti.retakeToken(x)
	}
	if ti != nil && ti.w.p.s == s {
		// The turn waits on this call: an edge of the wait-for graph, read
		// by the owners to fail a call that closes a deadlock (deadlock.go).
		// A call to another silo's grain is none of this silo's graph.
		if mine, hook, ok := ti.waitKey(); ok {
			w := &ti.w.p.waits
			var held *atomic.Bool
			if x := ti.a.x.Load(); x != nil && ti.a.k.interleaves() {
				held = &x.held
			}
			w.start(ti.a.ID, mine, req, id, h, letIn, hook, held, ti, ti.a.k.oneHolds && ti.w.holding.Load())
			defer s.endWait(ti.w.p, ti.a, mine, req)
		}
	}
	var first bool
	if k.workers > 1 {
		first, err = s.pushWorker(ctx, p, &env, ti)
	} else {
		first, err = s.push(ctx, p, &env, ti)
	}
	if x != nil {
		ti.queued(x) // a turn let in may run now: it sends after this request (TestAnInterleavedTurnsSendsFollowTheCallThatLetItIn)
	}
	if err != nil {
		req.Abandon() // never sent: nobody waits on it
		return nil, err
	}
	if ti != nil {
		if p != ti.w.p && !mayReenter && s.mayYieldHolding() {
			// A grain of another partition may answer while this one
			// yields: then the turn goes on without having handed its
			// partition off (a new owner's goroutine, a worker, and the
			// turn's outcome passed back as a control message, saved). A
			// grain of its own partition cannot run before it does; and a
			// call that let others interleave hands off at once, since
			// taking the turn token back may wait for them. Nor does a
			// turn yield with the scheduler crowded or hogged (yield.go):
			// it would hold its partition — still its own while it yields
			// — until every goroutine waiting for a core had run (the
			// example game with 3,000 bots: 20,000 such yields in 3 s,
			// 150–250 µs each on average, up to 15 ms — the partitions
			// held two thirds of the time; handing off at once, it played
			// twice the matches).
			ti.w.holdYield()
			if r, ok := req.Take(); ok {
				return s.answered(ti, ask, nil, r)
			}
		}
		// The turn is about to block: let its partition serve other grains.
		ti.w.detach()
	}
	// Give the owner a moment before parking: a reply that comes while this
	// goroutine yields is taken without the select's park and wake-up,
	// which cost more than the turn itself (Call round trip 820 → 540 ns,
	// ask workload +15–20 %). Not behind a CPU-bound goroutine, nor when
	// the call is the first message of a quiet partition: then it parks at
	// once, and its reply wakes it next on the owner's core (yield.go).
	if p.callerYields(first) {
		s.yield()
	}
	if r, ok := req.Take(); ok { // no channel: the owner left the reply in req
		return s.answered(ti, ask, nil, r)
	}
	done := s.replyChan()
	reply := req.DoneOn(done)
	// Without a deadline on ctx, the default call timeout runs on a pooled
	// timer rather than a derived context: no allocation on the hot path.
	// It is taken only now, for a call about to park: one answered while
	// its caller yielded pays for no timer (a round trip 800 → 630 ns).
	var expired <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := s.timer(k.callTimeout)
		defer s.timers.Put(t)
		defer t.Stop()
		expired = t.C
	}
	select {
	case r := <-reply:
		return s.answered(ti, ask, done, r)
	case <-ctx.Done():
		// A reply may have raced the deadline: prefer it.
		select {
		case r := <-reply:
			return s.answered(ti, ask, done, r)
		default:
		}
		req.Abandon()       // a turn not begun yet is dropped, not run for nobody
		ask.tc.callerGone() // one under way sees its ctx end
		ti.lend()
		if err = s.ctxErr(ctx); errors.Is(err, context.DeadlineExceeded) {
			return nil, timedOut(ti, id, err)
		}
		return nil, err
	case <-expired:
		req.Abandon()
		ask.tc.timeOut() // the handler's ctx ends with the call, as the caller's would have
		ti.lend()
		return nil, timedOut(ti, id, errDefaultTimeout)
	}
}

// errDefaultTimeout is the cause of a call that timed out at the silo's
// default: a deadline too, so it matches context.DeadlineExceeded, as the
// handler's ctx then reports it.
var errDefaultTimeout = fmt.Errorf("granary: default call timeout (Config.CallTimeout, or the kind's WithCallTimeout): %w", context.DeadlineExceeded)

// answered ends an ask that has its reply: the reply channel, if it waited
// on one, goes back to the pool (nothing will send on it again), and the
// handler's ctx is over. ti is the calling turn's, if a grain called.
func (s *Silo) answered(ti *turnInfo, ask *askCtx, done chan queues.Result, r queues.Result) (any, error) {
	if done != nil {
		s.replies.Put(done)
	}
	ask.tc.end()
	if r.Err != nil {
		ti.lend() // an error may come from a turn that goes on: a given-up activation's
	}
	return r.Value, r.Err
}

// asTimeout reports a call's ended deadline as a *grain.TimeoutError; other
// errors pass unchanged.
func asTimeout(id grain.ID, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &grain.TimeoutError{ID: id, Cause: err}
	}
	return err
}

// replyChan returns an empty reply channel, reused from an ask that
// received its reply. A channel whose ask gave up is never reused: its reply
// may still come.
func (s *Silo) replyChan() chan queues.Result {
	if ch, ok := s.replies.Get().(chan queues.Result); ok {
		return ch
	}
	return make(chan queues.Result, 1)
}

// timer returns a stopped-and-reset timer from the silo's pool. Since Go
// 1.23, a stopped timer's channel holds no stale tick, so reuse is safe.
func (s *Silo) timer(d time.Duration) *time.Timer {
	if t, ok := s.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// Call sends msg to the grain id through c (a *Silo, or a grain's
// Context.Silo()) and returns its reply as a T. A reply of another type is a
// *grain.ReplyTypeError; a nil reply is T's zero value when T can be nil.
// See Silo.Ask for everything else.
func Call[T any](ctx context.Context, c grain.Caller, id grain.ID, msg any) (T, error) {
	var zero T
	if c == nil {
		return zero, fmt.Errorf("%w: nil Caller", grain.ErrSiloClosed)
	}
	v, err := c.Ask(ctx, id, msg)
	if err != nil {
		return zero, err
	}
	if t, ok := v.(T); ok {
		return t, nil
	}
	want := reflect.TypeFor[T]()
	if v == nil {
		switch want.Kind() {
		case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
			return zero, nil
		}
	}
	return zero, &grain.ReplyTypeError{ID: id, Want: want.String(), Got: fmt.Sprintf("%T", v)}
}
