package silo

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
)

// An activation that never ends — an OnActivate whose storage hangs, a
// factory that blocks — would keep its grain activating for good: every
// message to it waiting, each ask until its caller's deadline, the tells
// for ever. Orleans bounds it (ActivationTimeout, 30 s); so does
// Config.ActivationTimeout. The bound costs an activation that returns in
// time nothing but one compare-and-swap: only an activation turn that held
// its partition long enough to be handed off is watched. The owner that
// takes the partition over notes it (partition.run), with its deadline on
// the silo's clock; the idle ticks look at it; past the deadline the
// activation fails as if the hook had returned an error — the messages
// that waited for it, the turn's first included, are dead letters (reason
// activation failed), the grain leaves the directory, the failure counts
// against the kind's restart limits, the hook's ctx ends — while the hook
// goes on alone. What it does later is dropped: it never runs the first
// message, a timer it starts is refused (refuseTimers), and a hook that
// had not begun — the factory still ran — is not run (activateHook).
//
// The hook's return and the give-up race; worker.actRace settles it: the
// turn moves it from actHooking to actReturned once the factory and the
// hook have returned (or ended in runtime.Goexit), the owner from
// actHooking to actGivenUp, and only the winner acts. It is reset, a plain store, before
// every activation turn: the atomics on it come after, ordered by the
// turn's start and the partition's handoff.

const (
	actHooking  int32 = iota // the factory or OnActivate runs
	actReturned              // they returned in time: the turn goes on
	actGivenUp               // the owner gave up on them
)

// errActivationOverran is the cause of an activation given up on: a
// deadline, matching context.DeadlineExceeded.
var errActivationOverran = fmt.Errorf("granary: the activation overran Config.ActivationTimeout: %w", context.DeadlineExceeded)

// actWatch is an activation turn handed off while it ran: the give-up's
// deadline, and the worker that runs it (and holds its first message).
type actWatch struct {
	a        *act
	w        *worker
	deadline time.Duration
}

// watchActivation notes that the activation turn of from, whose partition
// this owner has just taken over, runs on without it. With no
// ActivationTimeout it is never given up on, but it is noted all the same:
// a Close takes its first message (closeActivations).
func (p *partition) watchActivation(from *worker) {
	if from.kind != tkActivate {
		return
	}
	deadline := time.Duration(math.MaxInt64)
	if p.s.cfg.ActivationTimeout >= 0 {
		deadline = p.now + p.s.cfg.ActivationTimeout
	}
	p.actWatch = append(p.actWatch, actWatch{a: from.a, w: from, deadline: deadline})
	p.needIdleTicks() // they forget it once it has ended
}

// checkActivations gives up on the watched activations past their
// deadline, and forgets those that ended. Called each idle tick.
func (p *partition) checkActivations() {
	keep := p.actWatch[:0]
	for _, aw := range p.actWatch {
		if cur, ok := p.dir.Get(aw.a.ID, aw.a.ID.Hash()); !ok || cur != aw.a || aw.a.State() != activation.Activating ||
			atomic.LoadInt32(&aw.w.actRace) != actHooking {
			continue // it ended (or was removed) meanwhile
		}
		if p.now < aw.deadline {
			keep = append(keep, aw)
			continue
		}
		p.activationOverran(aw.a, aw.w)
	}
	clear(p.actWatch[len(keep):])
	p.actWatch = shrink(keep)
}

// activationOverran gives up on a's activation, run by w, if the turn has
// not got past it meanwhile.
func (p *partition) activationOverran(a *act, w *worker) {
	if !atomic.CompareAndSwapInt32(&w.actRace, actHooking, actGivenUp) {
		return
	}
	p.abandoned++ // until its turn ends (finish: res.gaveUp)
	refuseTimers(a, refuseGivenUp)
	p.s.log(slog.LevelWarn, "granary: the activation overran its timeout; it failed without it", "grain", a.ID.String())
	if hc := w.hook.Load(); hc != nil { // else it is not there yet: hookCtx ends it
		hc.timeOut() // the hook's ctx (turn.go: hookCtx) ends, DeadlineExceeded
	}
	// The first message is the turn's env, written before the turn began:
	// the turn will not run it.
	if first := w.env; first.Msg != nil {
		p.failActivation(a, errActivationOverran, &first)
	} else {
		p.failActivation(a, errActivationOverran, nil)
	}
}

// closeActivations takes the first message of each activation turn still
// running off the partition as the silo closes — an OnActivate that ignores
// its ended ctx — and makes it a dead letter (reason shutdown) now: the turn
// would otherwise run it after Close, or, if the activation failed, hand it
// back to a partition that has stopped, where nothing reads it any more, and
// it would be lost without a word (TestCloseTakesTheFirstMessageOfAStuck-
// Activation). It races the hook's return as a give-up does; if the turn
// has got past the hook, the message is its to run. Owner only, in closeAll,
// before the activations are forgotten.
func (p *partition) closeActivations() {
	for _, aw := range p.actWatch {
		if !atomic.CompareAndSwapInt32(&aw.w.actRace, actHooking, actGivenUp) {
			continue // it ended, or the turn runs its first message
		}
		p.abandoned++ // as at a give-up: its turn ends with res.gaveUp
		refuseTimers(aw.a, refuseClosed)
		if first := aw.w.env; first.Msg != nil {
			p.s.deadLetter(first, grain.ReasonShutdown, nil)
		}
	}
	clear(p.actWatch)
	p.actWatch = p.actWatch[:0]
}
