package silo

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// DeadLetter is a message that could not be delivered, and why. It prints
// as a line (String), logs as a group (LogValue) and encodes as JSON
// (MarshalJSON), each giving its message by type, not by value.
type DeadLetter struct {
	Target grain.ID
	Sender grain.ID // zero when sent from outside any grain of this silo
	Msg    any
	// Carried is what the message's Tell carried of its sender's ctx
	// (Config.Propagator), nil for nothing: a trace's span, say, to link
	// the loss to.
	Carried any
	Ask     bool // the message was an ask; its caller got an error naming Reason (for expired, it had given up already)
	Reason  grain.Reason
	Err     error // the cause, where there is one (the activation error, ...)
	Time    time.Time
}

// DeadLetters is a subscription to the silo's dead letters. Delivery never
// blocks the silo: when C is full, the dead letter is dropped from this
// subscription and counted in Dropped. C is closed when the subscription is
// cancelled or the silo has stopped.
//
// Safe for concurrent use.
type DeadLetters struct {
	C       <-chan DeadLetter
	c       chan DeadLetter
	dropped atomic.Uint64
	s       *Silo
	once    sync.Once
}

// Dropped returns how many dead letters this subscription missed because C
// was full.
func (d *DeadLetters) Dropped() uint64 {
	if d == nil {
		return 0
	}
	return d.dropped.Load()
}

// Cancel ends the subscription and closes C. On a nil subscription it does
// nothing.
func (d *DeadLetters) Cancel() {
	if d == nil || d.s.made() != nil {
		return // closed at birth
	}
	d.s.dead.remove(d)
}

// SubscribeDeadLetters subscribes to dead letters with a buffer of the given
// size, at least 1 and at most MaxDeadLetterBuffer (a larger one would be
// memory allocated up front, or a panic in make). Cancel the subscription
// when done with it.
// On a nil Silo, or one not made by New, C is closed at once: nothing will
// ever be a dead letter there.
func (s *Silo) SubscribeDeadLetters(buffer int) *DeadLetters {
	d := &DeadLetters{c: make(chan DeadLetter, min(max(buffer, 1), MaxDeadLetterBuffer)), s: s}
	d.C = d.c
	if s.made() != nil {
		d.once.Do(func() { close(d.c) })
		return d
	}
	s.dead.add(d)
	return d
}

// MaxDeadLetterBuffer is the largest buffer of a dead-letter subscription:
// about 10 MB of dead letters waiting to be read. A subscriber that falls
// further behind loses the newest, counted in Dropped.
const MaxDeadLetterBuffer = 1 << 16

// deadHub fans dead letters out to subscribers. Publishing reads an
// immutable snapshot of the subscriber list, so it takes no lock.
type deadHub struct {
	mu     sync.Mutex
	subs   atomic.Pointer[[]*DeadLetters]
	closed bool
	// ended: closed, set before the list empties, so that a publisher
	// that finds it empty knows whether it ended (publish, count)
	ended  atomic.Bool
	counts [grain.NumReasons]atomic.Uint64
	drops  atomic.Uint64
}

func (h *deadHub) add(d *DeadLetters) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		d.once.Do(func() { close(d.c) })
		return
	}
	var cur []*DeadLetters
	if p := h.subs.Load(); p != nil {
		cur = *p
	}
	next := append(append([]*DeadLetters(nil), cur...), d)
	h.subs.Store(&next)
}

func (h *deadHub) remove(d *DeadLetters) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.subs.Load(); p != nil {
		next := make([]*DeadLetters, 0, len(*p))
		for _, x := range *p {
			if x != d {
				next = append(next, x)
			}
		}
		h.subs.Store(&next)
	}
	// Closing under h.mu: publish holds it too, so no send races the close.
	d.once.Do(func() { close(d.c) })
}

// subscribed reports whether anyone subscribes to the dead letters now.
func (h *deadHub) subscribed() bool {
	p := h.subs.Load()
	return p != nil && len(*p) > 0
}

// publish offers dl to the subscribers and counts it — once the silo's
// dead letters have ended with it (close), in Stats alone: an observer
// closed after its silo leaves its unread notifications.
func (h *deadHub) publish(dl DeadLetter) { h.offer(dl, true) }

// offer is publish for a send refused as it is made: it reports false,
// doing nothing, once the silo's dead letters have ended — a subscriber,
// its channel closed, would never see dl — unless always.
func (h *deadHub) offer(dl DeadLetter, always bool) bool {
	p := h.subs.Load()
	if p == nil || len(*p) == 0 {
		return h.count(dl.Reason, always)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		if always {
			h.counts[dl.Reason].Add(1)
		}
		return false
	}
	h.counts[dl.Reason].Add(1)
	for _, d := range *h.subs.Load() {
		select {
		case d.c <- dl:
		default:
			d.dropped.Add(1)
			h.drops.Add(1)
		}
	}
	return true
}

// count counts a dead letter of reason no one subscribes to, and reports
// true — false, counting it only if always, once the silo's dead letters
// have ended (close).
func (h *deadHub) count(reason grain.Reason, always bool) bool {
	if h.ended.Load() && !always {
		return false
	}
	h.counts[reason].Add(1)
	return true
}

// close ends every subscription.
func (h *deadHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.ended.Store(true) // before the list empties (publish)
	if p := h.subs.Load(); p != nil {
		for _, d := range *p {
			d.once.Do(func() { close(d.c) })
		}
	}
	empty := []*DeadLetters{}
	h.subs.Store(&empty)
}

// deadLetter records that env cannot be delivered: it publishes the dead
// letter, then fails the ask, if it is one, with an error naming the reason.
// A tell's dead letter is also logged (Info, sampled): its sender had nil
// from Tell and hears of it nowhere else, as Akka logs its dead letters.
func (s *Silo) deadLetter(env queues.Envelope, reason grain.Reason, cause error) {
	if s.refuse(env, reason, cause) && env.Request == nil { // none once the silo has stopped (refuse)
		s.logDeadTell(env, reason, cause)
	}
}

// refuse is deadLetter for a send refused as it is made, whose sender has
// the error from Tell or Ask: nothing is logged. It reports false, and
// records nothing, once the silo has stopped — its dead letters ended, a
// subscriber would never see this one: the send is then refused as the
// silo's, with ErrSiloClosed (as a send that came after a Close, and was
// refused at a full grain's door or by a full queue after its ctx ended,
// once was with ErrOverloaded and no dead letter; the several-clients
// model test, TestSeveralClientsAtOnceKeepEveryPromise).
func (s *Silo) refuse(env queues.Envelope, reason grain.Reason, cause error) bool {
	// Counted and offered to subscribers before an ask's caller hears of
	// it: a caller holding the error finds the dead letter in Stats. With
	// no subscriber, only counted: a storm of refusals (a hot grain
	// shedding load) reads no clock for a record no one would see.
	if s.dead.subscribed() {
		msg, carried := queues.Unwrap(env.Msg)
		if !s.dead.offer(DeadLetter{
			Target:  env.Target,
			Sender:  env.Sender(),
			Msg:     msg,
			Carried: carried,
			Ask:     env.Request != nil,
			Reason:  reason,
			Err:     cause,
			Time:    s.clock.Now(),
		}, false) {
			return s.refusedClosed(env)
		}
	} else if !s.dead.count(reason, false) {
		return s.refusedClosed(env)
	}
	if env.Request != nil {
		env.Request.Resolve(nil, &grain.DeadLetterError{ID: env.Target, Reason: reason, Err: cause})
	}
	return true
}

// refusedClosed fails env's ask, if it is one, with ErrSiloClosed — its
// silo has stopped, and takes no dead letter — and reports false.
func (s *Silo) refusedClosed(env queues.Envelope) bool {
	if env.Request != nil {
		env.Request.Resolve(nil, grain.ErrSiloClosed)
	}
	return false
}

// logDeadTell logs a tell's dead letter: sampled per reason, so that a rare
// loss is not hidden by a storm of another (an overload, a shutdown). The
// message's type is logged, not its value, which may be large or private.
func (s *Silo) logDeadTell(env queues.Envelope, reason grain.Reason, cause error) {
	msg := s.deadMsgs[reason] // every Reason is below NumReasons
	write, dropped := s.sampled(msg)
	if !write {
		return
	}
	m, _ := queues.Unwrap(env.Msg)
	args := []any{"target", env.Target.String(), "msg_type", fmt.Sprintf("%T", m)}
	if sender := env.Sender(); sender != (grain.ID{}) {
		args = append(args, "sender", sender.String())
	}
	if cause != nil {
		args = append(args, "err", cause)
	}
	s.write(slog.LevelInfo, msg, dropped, args...)
}

// deadMessages makes the line each reason's tell dead letters are logged
// with: one message a reason, for the sampler to count apart.
func deadMessages() [grain.NumReasons]string {
	var m [grain.NumReasons]string
	for r := range m {
		m[r] = "granary: a tell became a dead letter: " + grain.Reason(r).String()
	}
	return m
}
