package silo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/ctxerr"
)

// errObserverTarget is what the send path says of an observer's ID: no
// grain kind of that name. Tell takes it as its cue to tell the observer;
// the rest (Deactivate, Stop, ...) return it. Made once: a tell to an
// observer allocates nothing for it.
var errObserverTarget = fmt.Errorf("%w: %q is the observers' (they take tells only)", grain.ErrUnknownKind, grain.ObserverKind)

// Observer is an address outside any grain that grains send to: a client's
// connection that wants to hear of a player's matches, a dashboard, a test
// waiting for a notification (Orleans' grain observers). Its ID is a
// grain.ID, of kind grain.ObserverKind, that a grain keeps in its state — in
// a grain.Observers list, say — and tells as it would tell a grain; what it
// tells waits in the observer's buffer, as a Notification, until it is
// received, with Receive or from C, in the order each sender sent it.
//
// An observer never makes its senders wait. A tell to one whose buffer is
// full is refused at once with grain.ErrOverloaded, and a tell to one that
// is closed with grain.ErrObserverClosed; each is also a dead letter
// (reasons overload and observer closed). Once the silo has stopped, a
// tell is refused with ErrSiloClosed, as every send is. An ask to an
// observer is refused with grain.ErrObserverAsk: it takes one-way messages
// only.
//
// Close an observer when done with it: what it holds unread then becomes
// dead letters, and the grains that notify it through grain.Observers drop
// it at their next Notify. While its silo shuts down, an observer still
// receives — the goodbyes grains send from OnDeactivate, say; once the silo
// has stopped, the observer is closed too, but what it holds stays
// readable: C is closed, and Receive returns grain.ErrObserverClosed, once
// the buffer is empty.
//
// Observer is safe for concurrent use. Make one with Silo.NewObserver: a
// zero or nil Observer is a closed one.
type Observer struct {
	s  *Silo
	id grain.ID
	ch chan Notification

	mu       sync.Mutex
	closed   bool // ch is closed (mu); no tell may send on it
	released bool // Close has been called (mu): what is left is a dead letter
}

// Notification is a message an observer received.
type Notification struct {
	Msg    any
	Sender grain.ID // the grain that told it; zero when told from outside any grain
	// Carried is what the tell carried of its sender's ctx
	// (Config.Propagator), nil for nothing.
	Carried any
}

// observers is a silo's registry of the observers it made.
type observers struct {
	m    sync.Map     // key → *Observer: tells look up without a lock
	open atomic.Int64 // observers made and not yet closed (Stats)

	// mu guards the fields below; a refused tell holds it shared while it
	// publishes its dead letter, so that the silo's stop — which takes it
	// before it closes the dead-letter subscriptions — never comes between.
	mu     sync.RWMutex
	nonce  string // tells this silo's observer IDs from another silo's of the same name
	next   uint64
	closed bool // the silo stopped: no new observer, and refusals are ErrSiloClosed
}

// NewObserver returns a new observer whose buffer holds up to buffer
// messages (at least 1, at most MaxObserverBuffer). Its ID is unique: no
// other observer, of this silo or another, has it. It returns
// ErrInvalidConfig for a buffer out of that range, and ErrSiloClosed once
// the silo has begun to stop. An observer may be made before Start, as
// kinds are registered.
func (s *Silo) NewObserver(buffer int) (*Observer, error) {
	if err := s.made(); err != nil {
		return nil, err
	}
	if buffer < 1 || buffer > MaxObserverBuffer {
		return nil, fmt.Errorf("%w: observer buffer %d, want 1 to %d", grain.ErrInvalidConfig, buffer, MaxObserverBuffer)
	}
	r := &s.observers
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || s.state.Load() >= stateStopping {
		return nil, grain.ErrSiloClosed
	}
	if r.nonce == "" {
		r.nonce = strconv.FormatUint(rand.Uint64(), 36)
	}
	r.next++
	key := s.cfg.Name + "." + r.nonce + "." + strconv.FormatUint(r.next, 10)
	o := &Observer{s: s, id: grain.NewID(grain.ObserverKind, key), ch: make(chan Notification, buffer)}
	r.m.Store(key, o)
	r.open.Add(1)
	return o, nil
}

// MaxObserverBuffer is the largest buffer of an observer: the buffer is
// allocated whole when the observer is made (about 5 MB at this size), and
// a client that falls further behind is one to drop, not to queue for.
const MaxObserverBuffer = 1 << 16

// ID returns the observer's address, for grains to tell (the zero ID for a
// zero or nil Observer, which no tell accepts).
func (o *Observer) ID() grain.ID {
	if o == nil {
		return grain.ID{}
	}
	return o.id
}

// C returns the channel the observer's notifications arrive on, for a
// select or a range. It is closed when the observer is: at Close, or once
// its silo has stopped (what it holds then is still received).
func (o *Observer) C() <-chan Notification {
	if !o.made() {
		ch := make(chan Notification) // closed: a range over it ends at once
		close(ch)
		return ch
	}
	return o.ch
}

// made reports whether o came from NewObserver.
func (o *Observer) made() bool { return o != nil && o.s != nil }

// Receive waits for the observer's next notification. It returns ctx's
// error if ctx ends first, and grain.ErrObserverClosed once the observer is
// closed and holds nothing more. A notification already held is returned
// whatever ctx's state — draining with an ended ctx takes what is there —
// so that which of the two comes back is no coin toss.
func (o *Observer) Receive(ctx context.Context) (Notification, error) {
	if ctx == nil {
		return Notification{}, grain.ErrNilContext
	}
	if !o.made() {
		return Notification{}, fmt.Errorf("%w: not made by Silo.NewObserver", grain.ErrObserverClosed)
	}
	select {
	case n, ok := <-o.ch:
		return o.received(n, ok)
	default:
	}
	select {
	case n, ok := <-o.ch:
		return o.received(n, ok)
	case <-ctx.Done():
		return Notification{}, ctxerr.Of(ctx)
	}
}

// received is Receive's outcome for a receive from o.ch.
func (o *Observer) received(n Notification, ok bool) (Notification, error) {
	if !ok {
		return Notification{}, fmt.Errorf("%w: %v", grain.ErrObserverClosed, o.id)
	}
	return n, nil
}

// Close closes the observer: tells to it fail from now on, and what it held
// unread becomes dead letters, reason observer closed (a concurrent Receive
// may still take some of it first; each notification goes one way or the
// other). Closing a closed observer does nothing more.
func (o *Observer) Close() {
	if !o.made() {
		return
	}
	o.mu.Lock()
	o.closeLocked()
	first := !o.released
	o.released = true
	o.mu.Unlock()
	if !first {
		return
	}
	// Also after the silo closed the channel: what is left now would
	// otherwise be lost without a trace.
	for n := range o.ch {
		o.s.observerDeadLetter(o.id, n, grain.ReasonObserverClosed)
	}
}

// close marks the observer closed, closes its channel and takes it out of
// the registry, if it was open.
func (o *Observer) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closeLocked()
}

// closeLocked is close with o.mu held.
func (o *Observer) closeLocked() {
	if o.closed {
		return
	}
	o.closed = true
	close(o.ch)
	o.s.observers.m.Delete(o.id.Key())
	o.s.observers.open.Add(-1)
}

// closeObservers closes every observer of the silo, leaving what they hold
// to be read, and refuses new ones. The silo calls it as it stops.
func (s *Silo) closeObservers() {
	r := &s.observers
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.m.Range(func(_, v any) bool {
		v.(*Observer).close()
		return true
	})
}

// tellObserver is Tell for an observer's ID, which the send path refused
// with refusal (an unknown kind; or the silo closed): it puts msg in the
// observer's buffer, or refuses it — a dead letter — if the buffer is full
// or the observer closed (or never was). It never waits. Observers receive
// while the silo shuts down, until it has stopped.
func (s *Silo) tellObserver(ctx context.Context, id grain.ID, msg any, refusal error) error {
	if st := s.state.Load(); st != stateRunning && st != stateStopping {
		if refusal == errObserverTarget {
			// The send path found the silo running, and it has stopped
			// since: a tell to an observer is refused as any send is
			// then, not with the observers' kind's answer to an ask.
			return grain.ErrSiloClosed
		}
		return refusal
	}
	if _, isInt := id.IntKey(); isInt || id.Key() == "" {
		return &grain.IDError{ID: id, Err: grain.ErrInvalidID}
	}
	if msg == nil {
		return grain.ErrNilMessage
	}
	n := Notification{Msg: msg}
	if ti := turnFrom(ctx); ti != nil && ti.w.p.s == s {
		n.Sender = ti.a.ID
	}
	if s.cfg.Propagator != nil {
		n.Carried = s.extract(ctx)
	}
	v, ok := s.observers.m.Load(id.Key())
	if ok {
		o := v.(*Observer)
		o.mu.Lock()
		sent, closed := false, o.closed
		if !closed {
			select {
			case o.ch <- n:
				sent = true
			default:
			}
		}
		o.mu.Unlock()
		if sent {
			return nil
		}
		if !closed {
			return s.refuseObserverTell(id, n, grain.ReasonOverload)
		}
	}
	return s.refuseObserverTell(id, n, grain.ReasonObserverClosed)
}

// refuseObserverTell refuses a tell to an observer with a dead letter of
// reason r — or, once the silo has stopped, with ErrSiloClosed and nothing
// more, as a send to a grain is refused then: its dead letter would reach
// no subscriber.
func (s *Silo) refuseObserverTell(id grain.ID, n Notification, r grain.Reason) error {
	reg := &s.observers
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	if reg.closed {
		return grain.ErrSiloClosed
	}
	s.observerDeadLetter(id, n, r)
	if r == grain.ReasonOverload {
		return &overloadError{id: id, observer: true}
	}
	if reg.nonce == "" || !strings.HasPrefix(id.Key(), s.cfg.Name+"."+reg.nonce+".") {
		// Two silos in one process do not share observers: say so, or the
		// grain's author looks for a Close that never happened.
		return fmt.Errorf("%w: %v is not an observer of this silo (%q)", grain.ErrObserverClosed, id, s.cfg.Name)
	}
	return fmt.Errorf("%w: %v", grain.ErrObserverClosed, id)
}

// observerDeadLetter records a notification for id that was refused or
// left unread, as any refused tell is.
func (s *Silo) observerDeadLetter(id grain.ID, n Notification, r grain.Reason) {
	s.dead.publish(DeadLetter{
		Target:  id,
		Sender:  n.Sender,
		Msg:     n.Msg,
		Carried: n.Carried,
		Reason:  r,
		Time:    s.clock.Now(),
	})
}
