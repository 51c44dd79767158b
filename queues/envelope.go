package queues

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/granary-go/granary/grain"
)

// Envelope is one message on its way to a grain. Everything but Request is
// plain data, so an envelope can be encoded to cross to another silo: the
// seam for clustering (AppendEnvelope, DecodeEnvelope). It is kept small (88 bytes) because every message is
// copied into and out of a queue: what only some messages carry is behind
// the Meta pointer.
type Envelope struct {
	Target grain.ID
	// Hash is Target.Hash(), computed once by the sender and used for both
	// the partition and the directory lookup.
	Hash uint64
	Msg  any
	// Request is set for an ask, nil for a tell.
	Request *Request
	// Meta is set for a message sent by a grain, or a timer's tick.
	Meta *Meta
}

// Meta is what some envelopes carry besides the message. One Meta may be
// shared by many envelopes (every tick of a timer, the messages a grain
// sends), so it must not change once it is in one.
type Meta struct {
	Sender grain.ID // the grain that sent the message
	Tick   *Tick    // set when the message is a timer's tick
	// MayInterleave is set when the target's kind lets the message run while
	// one of the grain's turns waits in a call: judged once, by the sender,
	// so that the runtime's own goroutines never run the kind's predicate.
	// It is not part of the wire form: a receiving silo judges again.
	MayInterleave bool
}

// Carrying is a message with what its Tell carries of the sender's ctx
// (silo.Config.Propagator: a trace's span, a tenant). The silo wraps a
// message in one on its way to the grain, and unwraps it before any code of
// the program sees the message again (the handler, the filters, a dead
// letter). Kept in Msg, not in Meta or the envelope, so that messages that
// carry nothing pay nothing for the field.
type Carrying struct {
	Msg     any
	Carried any // never nil
}

// Unwrap returns the message an envelope's Msg holds, and what it carries
// if it is a Carrying.
func Unwrap(msg any) (any, any) {
	if c, ok := msg.(*Carrying); ok {
		return c.Msg, c.Carried
	}
	return msg, nil
}

// Sender returns the grain that sent the message, or the zero ID.
func (e *Envelope) Sender() grain.ID {
	if e.Meta == nil {
		return grain.ID{}
	}
	return e.Meta.Sender
}

// Tick returns the timer tick the message is, or nil.
func (e *Envelope) Tick() *Tick {
	if e.Meta == nil {
		return nil
	}
	return e.Meta.Tick
}

// Tick names the timer a tick comes from, and which start of it.
type Tick struct {
	Name string
	Seq  uint64
	// Ended: the runtime marks a tick whose timer a turn stopped or
	// replaced while the tick was on its way to its grain, waiting for a
	// turn under way to end, so that it is not delivered. The runtime's
	// own, under its lock for the grain; not encoded.
	Ended bool
}

// Result is the outcome of an ask.
type Result struct {
	Value any
	Err   error
}

// Request is the caller's side of an ask: where the reply goes, the caller's
// context (the handler sees its cancellation; it is request-scoped data, like
// an http.Request's), and the call chain the request extends. The runtime
// delivers the outcome with Resolve; the caller takes it with Take if it
// has come, or waits for it on Done (DoneOn).
//
// A Request is safe for one caller and any number of resolvers at once.
type Request struct {
	Ctx   context.Context
	Chain Chain
	// Local is the runtime's own per-request state, allocated with the
	// request; it never crosses a silo.
	Local any
	done  chan Result
	out   Result // the outcome while handover is replyReady
	// Interleave is set when the target is already waiting in Chain and has
	// allowed re-entry: the request may run while the target's turn waits.
	Interleave bool
	// Forwards counts the times the runtime moved the request on from an
	// activation in a turn to another of its target's (a stateless
	// worker's), which it bounds. Runtime-owned, like Local.
	Forwards uint8
	// handover: how the outcome reaches the caller — in out, taken with
	// Take, or on done, for a caller that waits there (its low byte, see
	// Take) — in the bit abandoned, whether the caller gave up, and in the
	// high bits where the request waits (SetQueuedAt). One word for all,
	// beside out: a runtime's ask record that embeds a
	// request fits 192 bytes, a size class whose objects begin on a cache
	// line, and the outcome and its word share one.
	handover atomic.Uint32
}

// abandoned is the bit of Request.handover that says the caller no longer
// waits for the reply; the handover's state is the low byte; the high 16
// bits hold where the request waits (SetQueuedAt), plus one.
const (
	abandoned  uint32 = 1 << 8
	inLine     uint32 = 1 << 9
	stateMask  uint32 = 0xff
	queuedAt          = 16
	queuedMask uint32 = 0xffff << queuedAt
)

// Abandon records that the caller gave up waiting: its ctx ended, or its
// call timed out. A runtime that has not begun the request's turn yet drops
// it (as a dead letter) rather than run it for nobody.
func (r *Request) Abandon() { r.handover.Or(abandoned) }

// Abandoned reports whether the caller gave up waiting.
func (r *Request) Abandoned() bool { return r.handover.Load()&abandoned != 0 }

// SetInLine records that the request, though Interleave, was not let in
// beside its target's waiting turn — the turn that allowed re-entry on its
// chain had ended — and waits for its target's turns like any other.
// Runtime-owned, like Local; safe to read from another goroutine.
func (r *Request) SetInLine() { r.handover.Or(inLine) }

// InLine reports whether SetInLine was called.
func (r *Request) InLine() bool { return r.handover.Load()&inLine != 0 }

// SetQueuedAt records that the request waits in the mailbox of its
// target's activation in partition part, or runs there: of the
// activations of a target that has several (a stateless worker), the one
// whose turn it waits behind or is, which a deadlock walk reads from
// another goroutine. A part the
// word cannot hold (65,535 or more) is recorded as unknown.
// Runtime-owned, like Local.
func (r *Request) SetQueuedAt(part int) {
	at := uint32(0)
	if part >= 0 && part < 0xffff {
		at = uint32(part+1) << queuedAt
	}
	for {
		x := r.handover.Load()
		if r.handover.CompareAndSwap(x, x&^queuedMask|at) {
			return
		}
	}
}

// QueuedAt returns the partition SetQueuedAt last recorded, if any.
func (r *Request) QueuedAt() (part int, ok bool) {
	at := r.handover.Load() >> queuedAt
	return int(at) - 1, at != 0
}

// NewRequest returns a request whose reply can be awaited with Done.
func NewRequest(ctx context.Context, chain Chain) *Request {
	r := &Request{}
	r.Init(ctx, chain)
	return r
}

// Init prepares a request embedded in a larger allocation.
func (r *Request) Init(ctx context.Context, chain Chain) {
	r.InitWith(ctx, chain, make(chan Result, 1))
}

// InitWith is Init with a reply channel the caller provides: an empty
// channel of capacity 1, which the caller may reuse once it has received
// this request's reply from it (a request is resolved at most once, and
// only the first Resolve sends). With a nil done the caller takes the
// outcome with Take, or waits for it with DoneOn.
func (r *Request) InitWith(ctx context.Context, chain Chain, done chan Result) {
	r.Ctx, r.Chain, r.done = ctx, chain, done
}

// The outcome's handover (Request.handover). A caller that looks for the
// outcome after a yield finds it in the request most of the time: then it
// takes it there, and neither side touches a channel — a channel's lock,
// taken by the owner to send and by the caller to receive, on a line that
// crosses the cores each time, was 15 % of the `ask` workload's CPU. Only a
// caller about to wait says so (replyWaiting), and only then does the
// outcome go on the channel.
const (
	replyPending uint32 = iota // no outcome yet, nobody waiting on the channel
	replyWriting               // a Resolve is writing out
	replyReady                 // the outcome is in out
	replyWaiting               // the caller waits on done: the outcome goes there
	replySent                  // the outcome went on done, or was taken
)

// Resolve delivers the outcome. Only the first call has an effect, so the
// runtime can never block on, or double-deliver, a reply.
func (r *Request) Resolve(v any, err error) {
	for {
		x := r.handover.Load()
		switch x & stateMask {
		case replyPending:
			if r.handover.CompareAndSwap(x, x&^stateMask|replyWriting) {
				r.out = Result{Value: v, Err: err}
				// Writing to ready, keeping the abandoned bit, which the
				// caller may set meanwhile: an add, not a store.
				r.handover.Add(replyReady - replyWriting)
				return
			}
		case replyWaiting:
			if r.handover.CompareAndSwap(x, x&^stateMask|replySent) {
				r.send(Result{Value: v, Err: err})
				return
			}
		default:
			return // resolved already
		}
	}
}

// send puts res on done, which is empty: nothing else sends there.
func (r *Request) send(res Result) {
	select {
	case r.done <- res:
	default:
	}
}

// Take returns the outcome if it has come, for the one caller that waits
// for it, which takes it either here or from the channel (Done, DoneOn),
// never both. It touches no channel.
func (r *Request) Take() (Result, bool) {
	if r.handover.Load()&stateMask != replyReady {
		return Result{}, false
	}
	return r.out, true
}

// Done returns the channel the outcome arrives on, once.
func (r *Request) Done() <-chan Result {
	for {
		x := r.handover.Load()
		switch x & stateMask {
		case replyPending:
			if r.handover.CompareAndSwap(x, x&^stateMask|replyWaiting) {
				return r.done
			}
		case replyWriting:
			runtime.Gosched() // a Resolve is between two of its stores
		case replyReady:
			if r.handover.CompareAndSwap(x, x&^stateMask|replySent) {
				r.send(r.out)
				return r.done
			}
		default:
			return r.done
		}
	}
}

// DoneOn is Done for a request made without a reply channel
// (InitWith(ctx, chain, nil)): done, empty and of capacity 1, becomes its
// channel. Called once, by the caller about to wait.
func (r *Request) DoneOn(done chan Result) <-chan Result {
	r.done = done // before Done says the caller waits: Resolve reads it after
	return r.Done()
}

// Resolved reports whether the request's outcome has been delivered, or is
// being: it is true from the moment a Resolve begins, before the caller
// can see the outcome, and stays true.
func (r *Request) Resolved() bool {
	switch r.handover.Load() & stateMask {
	case replyWriting, replyReady, replySent:
		return true // replySent only ever follows a Resolve
	}
	return false
}

// Link is one grain waiting in a call chain.
type Link struct {
	ID grain.ID
	// Silo is the silo the grain waits in, by a number each silo draws
	// for itself when it is made (its incarnation): two silos in one
	// process each host a grain of every ID, and a chain that passes
	// through both must not take one for the other.
	Silo uint64
	// SiloName is that silo's name (its Config.Name), for what a person
	// reads: an error naming the chain's grains says where each waits.
	// Silo, not the name, tells silos apart.
	SiloName string
	// AllowReentry: the grain made its call allowing call-chain reentrancy,
	// so a request of this chain may run on it while it waits.
	AllowReentry bool
}

// Chain is the call chain a request extends: the grains, outermost first,
// that wait for it to return.
type Chain []Link

// Find returns the link of the grain id of the given silo, if it waits in
// the chain.
func (c Chain) Find(silo uint64, id grain.ID) (Link, bool) {
	for _, l := range c {
		if l.Silo == silo && l.ID == id {
			return l, true
		}
	}
	return Link{}, false
}

// Extend returns the chain with l appended, never sharing c's backing array
// (one turn can make many calls).
func (c Chain) Extend(l Link) Chain {
	out := make(Chain, len(c)+1)
	copy(out, c)
	out[len(c)] = l
	return out
}

// IDs returns the grains of the chain in order.
func (c Chain) IDs() []grain.ID {
	ids := make([]grain.ID, len(c))
	for i, l := range c {
		ids[i] = l.ID
	}
	return ids
}

// Cycle is the error for a call that would close a cycle: the chain's
// grains, then the grain id of the silo numbered silo, named name, that it
// comes back to. For a chain through more than one silo it names each
// grain's silo (grain.CallCycleError.Silos).
func (c Chain) Cycle(silo uint64, name string, id grain.ID) *grain.CallCycleError {
	e := &grain.CallCycleError{Chain: append(c.IDs(), id)}
	across := false
	for _, l := range c {
		across = across || l.Silo != silo
	}
	if !across {
		return e
	}
	labels := make(map[uint64]string) // by silo number
	used := make(map[string]bool)
	label := func(silo uint64, name string) string {
		if l, ok := labels[silo]; ok {
			return l
		}
		if name == "" {
			name = "unnamed"
		}
		l := name
		for n := 2; used[l]; n++ {
			l = fmt.Sprintf("%s#%d", name, n)
		}
		labels[silo], used[l] = l, true
		return l
	}
	e.Silos = make([]string, 0, len(e.Chain))
	for _, l := range c {
		e.Silos = append(e.Silos, label(l.Silo, l.SiloName))
	}
	e.Silos = append(e.Silos, label(silo, name))
	return e
}
