package silo

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/queues"
)

// turnKey is the context key of the running turn.
type turnKey struct{}

// turnInfo is what a turn's ctx tells the silo's send path: which activation
// is calling (the sender), the call chain it extends, and the worker to hand
// the partition off from before it blocks.
type turnInfo struct {
	a   *act
	req *queues.Request // the ask being handled; nil for a tell, a tick or a hook
	w   *worker
	// calls in flight that let others interleave (see leaveToken); 32 bits,
	// so that with the flags below it takes one word (an ask's record is
	// 192 bytes: TestAnAskFits192Bytes)
	calls int32
	// holdsToken: the turn holds a.token. Interleaved turns take it at
	// their start; an ordinary turn only once it comes back from a call
	// that let others interleave. Turns never interleaved never touch it.
	holdsToken bool
	retaking   bool // a goroutine of the turn waits to take the token back
	queuing    bool // a call of the turn holds the token until its request is queued (leaveToken)
	// over: the turn has ended (endTurnToken), with calls of goroutines it
	// did not wait for maybe still out: they must not take the token back
	// for it. Set only in a ctx that is never reused (an ask's, a hook's).
	over bool
	// deact: the turn is an OnDeactivate, this one. Its calls are edges of
	// the wait-for graph (deadlock.go) while it runs — the grain lets
	// nothing in then — and none once the silo has given up on it
	// (waitShard.dropHook): the grain's next activation does not wait for it.
	deact *deactHook
}

// activating reports whether the turn is the OnActivate of a grain of an
// interleaving kind (reentrant, or with a WithMayInterleave predicate):
// unlike the kind's other turns, it lets nothing in while it waits
// (interleave.go: open). A kind that does not interleave lets nothing in
// while any turn waits, and its activation is not marked.
func (ti *turnInfo) activating() bool {
	if !ti.a.k.interleaves() {
		return false
	}
	x := ti.a.x.Load()
	return x != nil && x.activating.Load()
}

// waitKey returns the key under which a call of the turn is an edge of the
// wait-for graph (deadlock.go), in its partition's shard, and reports
// whether it is one, and whether it is a hook call, made while the grain
// lets nothing in — in OnActivate or OnDeactivate, whatever its kind: not
// even what a WithMayInterleave predicate takes (interleave.go: open). A
// grain's edge is under its identity's hash — a reentrant one's too, read
// only where the grain lets nothing in (hook; or being stopped, marked by
// waitShard.hold) — a stateless worker's activation's under a key of its
// own (workerWaitKey), a reentrant one's too: without it a walk took the
// turns let into a reentrant stateless activation, and its hooks, for free,
// and cycles through them waited for their deadlines.
func (ti *turnInfo) waitKey() (key uint64, hook, ok bool) {
	hook = ti.deact != nil || ti.activating()
	return ti.w.p.waitKeyOf(ti.a), hook, true
}

// chain returns the call chain of the request the turn handles.
func (ti *turnInfo) chain() queues.Chain {
	if ti.req == nil {
		return nil
	}
	return ti.req.Chain
}

// turnFrom returns the turn ctx runs in, or nil outside any turn.
func turnFrom(ctx context.Context) *turnInfo {
	return turnOf(ctx, false)
}

// turnForCall is turnFrom for a send that may give the grain's turn token
// up and take it back (Ask, Await): it holds the turn's info across a
// wait, and an interleaving tell's ctx it came from is not reused for the
// worker's next such turn (ownCtx.info).
func turnForCall(ctx context.Context) *turnInfo {
	return turnOf(ctx, true)
}

func turnOf(ctx context.Context, call bool) *turnInfo {
	if tc, ok := ctx.(*turnCtx); ok { // the turn's own ctx, as most sends from a turn pass
		if tc.ended() {
			return nil // an ask's turn that is over: whoever holds its ctx is not in it
		}
		return &tc.info
	}
	if oc, ok := ctx.(*ownCtx); ok {
		return oc.info(call)
	}
	ti, _ := ctx.Value(turnKey{}).(*turnInfo)
	return ti
}

// turnCtx is the context.Context a handler receives. It is cancelled when the
// caller's ctx is (for an ask), when the silo closes, and when the turn ends;
// and it carries the turn. A tell's turn uses the one that lives in its
// worker, reset for every turn, so it costs no allocation (its Done is the
// silo's); an ask's turn uses the one allocated with its request. The merged
// Done channel is made only if the handler asks for it.
type turnCtx struct {
	parent context.Context // the ask's ctx or the hook's deadline; nil for a tell
	// home is the partition whose base ctx (the silo's lifetime) the
	// turn's ends with, and whose liveCtxs hold its merged Done channel,
	// if it makes one: set once per worker, or with the ask
	home *partition
	info turnInfo
	m    atomic.Pointer[merged] // made on the first Done, if parent can end
	// fate: how the ctx ended, if it has, in bits (one word: an ask's
	// record, a turnCtx with its request, fits 192 bytes —
	// TestAnAskFits192Bytes):
	//
	// ctxEnded: the call this ctx served is over — its caller has the
	// reply. An ask's ctx is never reused, so it stays done and Canceled,
	// and no longer a turn to the send path, for a goroutine that kept it.
	// A worker's, reused turn after turn, cannot.
	//
	// ctxTimedOut: the caller gave up at the silo's default call timeout
	// (Config.CallTimeout), which its own ctx knows nothing of; the
	// handler's ctx ends then too, with DeadlineExceeded, as if the
	// caller's ctx had had that deadline. Set by the caller.
	//
	// ctxGone: the caller gave up, its own ctx done (set by the caller,
	// which watches that ctx anyway as it waits: so the handler's ctx needs
	// no registration with it, only this mark).
	//
	// ctxTimedOut and ctxGone are set only while ctxEnded is not (endBy):
	// Err says whichever came first.
	//
	// ctxUsed: a worker's itc whose turn's info was handed to a call
	// (ownCtx.info): a goroutine of the turn may still hold it once the
	// turn is over, so the worker makes its next such turn a ctx of its
	// own (turnCtxFor).
	fate atomic.Uint32
	// wrapped: the handler of a turn with this ctx gets an ownCtx of it
	// (a worker's itc: tells of kinds whose turns interleave); release
	// ends that, moving gen on
	wrapped bool
	// hook: an OnActivate's own ctx (partition.hookCtx), which ends for
	// good with the hook (release marks it ended): a goroutine the hook
	// started that kept it — to watch a subscription, say — passed for the
	// hook's turn after it, and took the grain's turn token back after its
	// calls for a turn that would never give it up. (Beside wrapped: both
	// fit in the word fate leaves.)
	hook bool
	gen  atomic.Uint64
}

// The bits of turnCtx.fate.
const (
	ctxEnded uint32 = 1 << iota
	ctxTimedOut
	ctxGone
	ctxUsed
)

// used reports whether a call was handed c's turn info (ctxUsed).
func (c *turnCtx) used() bool { return c.fate.Load()&ctxUsed != 0 }

// ended reports whether the call c served is over (ctxEnded).
func (c *turnCtx) ended() bool { return c.fate.Load()&ctxEnded != 0 }

// end marks the call c served over.
func (c *turnCtx) end() { c.fate.Or(ctxEnded) }

// handlerCtx returns the ctx the turn's handler (and its Decider) runs
// under: c itself, or, for a tell's turn of a kind whose turns interleave,
// an ownCtx of it.
func (c *turnCtx) handlerCtx() context.Context {
	if !c.wrapped {
		return c
	}
	return &ownCtx{tc: c, gen: c.gen.Load()}
}

// ownCtx is the ctx a tell's turn of a kind whose turns interleave
// (reentrant, WithMayInterleave) gives its handler: the worker's reused
// turnCtx while the turn lasts (whose Done, if read, is a channel the
// turn's end closes, so that a ctx derived in the turn ends with it), and,
// once it is over, a ctx that has ended and is no turn's. Such a turn's calls give up the grain's turn token and
// take it back (token.go); a goroutine that kept the worker's ctx past the
// turn — a misuse (docs/calls.md) — passed for whatever turn the worker
// ran next, gave up and took back a token not its own, and could leave the
// grain waiting for it for ever. A plain kind's tell keeps the worker's
// ctx, and its allocation-free turn: there the misuse only misattributes.
// 16 bytes a turn, where a turnCtx of its own was 112 and twice the tell's
// time (BenchmarkTellReentrant).
type ownCtx struct {
	tc  *turnCtx
	gen uint64 // tc.gen while the turn lasts
}

func (c *ownCtx) over() bool { return c.tc.gen.Load() != c.gen }

func (c *ownCtx) Deadline() (time.Time, bool) { return time.Time{}, false } // a tell's has none

func (c *ownCtx) Done() <-chan struct{} {
	if c.over() {
		return c.tc.home.over
	}
	return c.tc.Done()
}

func (c *ownCtx) Err() error {
	if c.over() {
		return context.Canceled
	}
	return c.tc.Err()
}

func (c *ownCtx) Value(key any) any {
	if key == (turnKey{}) {
		if ti := c.info(true); ti != nil { // a ctx derived from the turn's: taken for a call's
			return ti
		}
		return nil
	}
	return nil // a tell's ctx carries no values (turnCtx.Value)
}

// info returns the turn's info while the turn lasts. For a call (one that
// may give the grain's turn token up and take it back, holding the info
// across its wait) it marks the ctx used first: the turn's end moves gen
// on, then reads used (endTurnToken), so either this sees the turn over,
// or the end sees the ctx used — marks the turn over for the call, and
// the worker takes a ctx of its own for its next such turn (turnCtxFor),
// never resetting the info under the call. A tell reads the info only
// while it sends, so the handler's own tells leave the ctx to be reused.
func (c *ownCtx) info(call bool) *turnInfo {
	if call {
		c.tc.fate.Or(ctxUsed)
	}
	if c.over() {
		return nil
	}
	return &c.tc.info
}

// AfterFunc is turnCtx.AfterFunc, or f on its own goroutine once the turn
// is over.
func (c *ownCtx) AfterFunc(f func()) (stop func() bool) {
	if c.over() {
		go f()
		return func() bool { return false }
	}
	return c.tc.AfterFunc(f)
}

// timeOut ends c for a caller that gave up at the default call timeout, or
// for a hook the silo gave up on.
func (c *turnCtx) timeOut() {
	if c.endBy(ctxTimedOut) {
		if m := c.m.Load(); m != nil {
			m.cancel(context.DeadlineExceeded)
		}
	}
}

// callerGone ends c for a caller whose own ctx ended while it waited.
func (c *turnCtx) callerGone() {
	if c.endBy(ctxGone) {
		if m := c.m.Load(); m != nil {
			m.cancel(c.parent.Err())
		}
	}
}

// endBy marks how c ended, bit, unless its turn was over first, and
// reports whether it did. Err says the first way c ended from then on
// (sourceErr), as a context must: a hook given up on that had not made
// a Done channel, and returned later, said DeadlineExceeded until it
// returned and Canceled after, to a goroutine of its that kept the ctx
// (the clients' model test read it so).
func (c *turnCtx) endBy(bit uint32) bool {
	for {
		f := c.fate.Load()
		if f&ctxEnded != 0 {
			return false
		}
		if c.fate.CompareAndSwap(f, f|bit) {
			return true
		}
	}
}

// merged is the Done channel of a turn whose ctx has two sources.
type merged struct {
	done chan struct{}
	mu   sync.Mutex
	err  error       // mu: set when done is closed, never before
	stop func() bool // mu: the registration with a hook's parent ctx
	live *liveCtxs   // where it is registered, to end with the silo
	// mu: what AfterFunc registered, until done (most often one derived
	// ctx: afterBuf holds it)
	after    []afterEntry
	afterBuf [1]afterEntry
	afterSeq uint64
}

type afterEntry struct {
	seq uint64
	f   func()
}

func (m *merged) cancel(err error) {
	if err == nil { // a caller's ctx whose Err is nil once done: never twice-closed
		err = context.Canceled
	}
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = err
	close(m.done)
	after := m.after
	m.after = nil
	m.mu.Unlock()
	for _, e := range after {
		e.f()
	}
}

// afterFunc registers f to be called when m is done; stop unregisters it,
// reporting whether it did so before f was called.
func (m *merged) afterFunc(f func()) (stop func() bool) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		// Not on this goroutine: the context package calls AfterFunc with
		// the derived ctx's lock held, and f takes it.
		go f()
		return func() bool { return false }
	}
	if m.after == nil {
		m.after = m.afterBuf[:0]
	}
	m.afterSeq++
	seq := m.afterSeq
	m.after = append(m.after, afterEntry{seq: seq, f: f})
	m.mu.Unlock()
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		i := slices.IndexFunc(m.after, func(e afterEntry) bool { return e.seq == seq })
		if i < 0 {
			return false
		}
		m.after = slices.Delete(m.after, i, i+1)
		return true
	}
}

// askCtx is an ask's request and the context its handler sees, in one
// allocation. Each ask has its own turnCtx: a context that a handler hands
// to others (a derived context, a nested call) must never be reused by
// another turn.
type askCtx struct {
	req queues.Request
	tc  turnCtx
}

// chainedAsk returns a new ask for a call made by a turn whose call chain
// is outer, and the chain extended by link — in the ask's own allocation
// while it is short, as most are: a call between grains allocates its
// chain with its ask rather than apart (a call made by a turn that no call
// made — a tell's, or one asked from outside — has a chain of one link; a
// request through a service's grains, a few).
func chainedAsk(outer queues.Chain, link queues.Link) (*askCtx, queues.Chain) {
	switch len(outer) {
	case 0:
		return withLinks(outer, link, func(l *[1]queues.Link) queues.Chain { return l[:] })
	case 1:
		return withLinks(outer, link, func(l *[2]queues.Link) queues.Chain { return l[:] })
	case 2:
		return withLinks(outer, link, func(l *[3]queues.Link) queues.Chain { return l[:] })
	case 3:
		return withLinks(outer, link, func(l *[4]queues.Link) queues.Chain { return l[:] })
	}
	return &askCtx{}, outer.Extend(link)
}

// linkedAsk is an ask with its chain's links, an array L of them.
type linkedAsk[L any] struct {
	askCtx
	links L
}

// withLinks allocates an ask with room for outer and link, slice giving
// the room as a chain, and writes them there.
func withLinks[L any](outer queues.Chain, link queues.Link, slice func(*L) queues.Chain) (*askCtx, queues.Chain) {
	a := &linkedAsk[L]{}
	chain := slice(&a.links)
	chain[copy(chain, outer)] = link
	return &a.askCtx, chain
}

func (a *askCtx) init(ctx context.Context, chain queues.Chain, p *partition) {
	a.req.InitWith(ctx, chain, nil) // a channel only if the caller waits (Ask)
	a.req.Local = &a.tc
	a.tc.home = p
}

// reset readies c for a turn of a, worked by w, handling req (nil for a
// tell, a tick or a hook) with parent as its caller's ctx (nil when its only
// lifetime is the silo's). It stores field by field: a turnInfo built
// whole and copied in is read back from the stack while its halves are still
// in flight, a store-forwarding stall that cost 8 % of a tell's CPU.
func (c *turnCtx) reset(parent context.Context, a *act, req *queues.Request, w *worker, interleaved bool) {
	if c.m.Load() != nil {
		// A worker's ctx, reused: its last turn made a merged Done channel
		// (an interleaving tell's turn that read Done: the worker's itc),
		// which ended with that turn. Kept, it was every later turn's Done
		// and Err: each tell's handler found its ctx canceled
		// (TestACtxDerivedFromAnInterleavingTellsCtxEndsWithTheTurn; an
		// OnActivate's ctx, which once was the worker's too, is its own
		// now).
		c.m.Store(nil)
	}
	// What Done, Err, Deadline and Value read is written only if it
	// changes: a library may watch a tell's ctx from a goroutine of its
	// own that first looks after the turn (database/sql's Rows do), and a
	// write here would race with that look; a tell's next turn changes
	// none of it.
	if (parent != nil || c.parent != nil) && c.parent != parent { // a tell's nil and nil: no call to compare them
		c.parent = parent
	}
	c.info.a = a
	if c.info.req != req {
		c.info.req = req
	}
	if c.info.w != w {
		c.info.w = w
	}
	c.info.calls = 0
	c.info.holdsToken = interleaved
	c.info.retaking = false
	c.info.queuing = false // (a ctx a call held is not reused: it was already)
	c.info.over = false    // a worker's itc, reused only if no call held it (turnCtxFor)
}

// release ends the turn's context: a merged Done channel, if one was made,
// is closed (so whatever watches it, such as a context derived from it,
// lets go) and detached from its sources. Called when the turn ends.
func (c *turnCtx) release() {
	if c.wrapped {
		c.gen.Add(1) // its ownCtx ends
	}
	if c.hook || c.info.req != nil {
		// An OnActivate's or an ask's, never reused: over for good. (An
		// ask's caller marks it too, once it has the reply; from here, a
		// goroutine of the turn that calls with it after the turn — the
		// handler did not wait for it — is no longer taken for the turn,
		// whose turn token it would have taken back for good.)
		c.end()
	}
	m := c.m.Load()
	if m == nil {
		return
	}
	m.mu.Lock()
	stop := m.stop
	m.mu.Unlock()
	if stop != nil {
		stop()
	}
	if m.live != nil {
		m.live.remove(m)
	}
	m.cancel(context.Canceled)
}

func (c *turnCtx) Deadline() (time.Time, bool) {
	if c.parent != nil {
		return c.parent.Deadline()
	}
	return time.Time{}, false
}

func (c *turnCtx) Done() <-chan struct{} {
	if m := c.m.Load(); m != nil {
		return m.done
	}
	if c.ended() { // asked for only after its turn: done already
		m := &merged{done: make(chan struct{})}
		m.cancel(c.sourceErr()) // Canceled, or how it ended before its turn did
		if !c.m.CompareAndSwap(nil, m) {
			return c.m.Load().done
		}
		return m.done
	}
	// An ask's ctx can also end at the default call timeout, whatever its
	// parent: only a tell's or a hook's (no request) is the silo's alone.
	// An interleaving tell's (wrapped: its handler has an ownCtx of it)
	// ends with its turn: a channel of its own, closed by release, or a
	// ctx derived in the turn would outlive a parent that is over.
	isAsk := c.info.req != nil
	if !c.wrapped && (c.parent == nil || (c.parent.Done() == nil && !isAsk)) {
		return c.home.base.Done()
	}
	// Registered with the partition before it is published, so that the
	// turn's release, which may come at once, finds it there to remove;
	// Close ends it with the silo (liveCtxs).
	m := &merged{done: make(chan struct{}), live: &c.home.live}
	m.live.add(m)
	if !c.m.CompareAndSwap(nil, m) {
		m.live.remove(m)
		return c.m.Load().done
	}
	if c.ended() {
		// The turn ended since the look above, and its release may have
		// found no channel to close (it marks the end, then looks): one
		// left open would keep a goroutine of the turn waiting for ever.
		m.live.remove(m)
		m.cancel(c.sourceErr())
		return m.done
	}
	parent := c.parent
	// An ask's caller watches its own ctx as it waits, and ends this one
	// when it gives up (callerGone, timeOut): no registration with it. A
	// hook's parent has no one watching it.
	if !isAsk && parent != nil && parent.Done() != nil {
		m.mu.Lock()
		m.stop = context.AfterFunc(parent, func() { m.cancel(parent.Err()) })
		m.mu.Unlock()
	}
	// The caller may have given up, or its ctx ended, before m was there
	// to cancel: Err, which read them while there was no m, has said so.
	if err := c.sourceErr(); err != nil {
		m.cancel(err)
	}
	return m.done
}

// sourceErr reads c's error from its sources, as if it had no channel of
// its own (turnCtx.m): its turn's end, its parent, its caller's timeout,
// the silo's lifetime.
func (c *turnCtx) sourceErr() error {
	// A give-up and a caller gone are marked only before the turn's end
	// (endBy): marked, they came first.
	f := c.fate.Load()
	if f&ctxTimedOut != 0 {
		return context.DeadlineExceeded
	}
	if f&ctxGone != 0 && c.parent != nil { // (an ask's turn sets its parent as it begins)
		if err := c.parent.Err(); err != nil {
			return err
		}
	}
	if f&ctxEnded != 0 {
		return context.Canceled
	}
	if c.parent != nil {
		if err := c.parent.Err(); err != nil {
			return err
		}
	}
	return c.home.base.Err()
}

// AfterFunc calls f once c is done, and returns what stops that. The
// context package uses it, when a handler derives a ctx from its turn's
// (context.WithTimeout(ctx, …) around a query), to cancel the derived ctx
// with the turn's; without it, each derived ctx took a goroutine of its
// own to watch the turn's Done.
func (c *turnCtx) AfterFunc(f func()) (stop func() bool) {
	c.Done() // makes the merged channel, if the ctx has one
	if m := c.m.Load(); m != nil {
		return m.afterFunc(f)
	}
	return context.AfterFunc(c.home.base, f) // the silo's lifetime alone: a tell's ctx
}

// Err is the error of the channel c made (Done), if it did; else read
// from c's sources. Once a source has ended, the channel is ended with it
// here, if nothing has yet: its sources can end before it does (an ask's
// parent ends before its caller, who watches it, ends c; a channel can be
// made after that), and an Err that had said an error, read from them,
// must not say nil after (context.Context: successive calls return the
// same error). An Ask read it twice and panicked on the nil. Nor another
// error: with no channel yet, the first error read makes one, ended with
// it — else a ctx that had said the silo's close's Canceled said the call
// timeout's DeadlineExceeded next (TestATurnCtxSaysOneErrorForGood). Only
// a ctx that ends with the silo alone makes none: it has one source.
func (c *turnCtx) Err() error {
	m := c.m.Load()
	if m == nil {
		err := c.sourceErr()
		if err == nil {
			return nil
		}
		c.Done()
		if m = c.m.Load(); m == nil {
			return err
		}
	}
	m.mu.Lock()
	err := m.err
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if err = c.sourceErr(); err == nil {
		return nil
	}
	m.cancel(err)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err // the first cancel's
}

func (c *turnCtx) Value(key any) any {
	if key == (turnKey{}) {
		if c.ended() {
			return nil
		}
		return &c.info
	}
	if c.parent != nil && c.parent != c.home.base {
		return c.parent.Value(key)
	}
	// The silo's ctx carries no values, so a tell's has none — nor a
	// tell's hook's, its parent the partition's child of it — and must
	// not show the context package the cancelCtx under it: found, a ctx
	// derived in the turn registers with it directly, and its timer's
	// unlinking (removeChild) reads this ctx from another goroutine, maybe
	// as the worker readies it for its next turn (a data race); and
	// context.Cause reads that cancelCtx's cause, not this ctx's — a hook
	// given up on, its cause DeadlineExceeded, said Canceled once the silo
	// had stopped. Not found, the package registers through AfterFunc,
	// whose undoing touches only the silo's ctx, and Cause says Err.
	return nil
}
