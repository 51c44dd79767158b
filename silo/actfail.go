package silo

import (
	"log/slog"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// An activation that keeps failing — OnActivate erroring while its storage
// is down, a factory that panics — would otherwise be retried by every
// message, each retry another call to what is failing. A grain whose
// activation failed is retried at once the first time; repeated failures
// count against its kind's restart limit and back off as restarts do
// (MinBackoff doubling to MaxBackoff), and past MaxRestarts in Window the
// identity is refused for Quarantine. Meanwhile its messages fail at once,
// as the failed activation's did, with the same *grain.ActivationError —
// nothing is run, nothing waits.

// maxActFails bounds the identities a partition tracks: messages to many
// distinct identities whose activation fails (ids that do not exist, say)
// must not pin memory for a Window each. Past it, new identities are
// retried at once, as they were before this was tracked.
const maxActFails = 4096

// actFailure is an identity's recent activation failures. Owner state.
type actFailure struct {
	restarts activation.Restarts
	until    time.Duration // messages before this fail at once
	err      error         // the last failure, which they fail with
	last     time.Duration // when it failed last, for forgetting it
}

// noteActivationFailure records that a's activation failed with aerr and
// decides how long its identity is refused.
func (p *partition) noteActivationFailure(a *act, aerr *grain.ActivationError) {
	if p.actFails == nil {
		p.actFails = make(map[grain.ID]*actFailure)
		p.needIdleTicks()
	}
	f := p.actFails[a.ID]
	if f == nil {
		if len(p.actFails) >= maxActFails {
			return // a flood of distinct failing identities: retried at once, as untracked
		}
		f = &actFailure{}
		p.actFails[a.ID] = f
	}
	d, backoff := a.k.sup.Restart(&f.restarts, p.now)
	if d == activation.Stop {
		backoff = a.k.sup.Quarantine
		f.restarts = activation.Restarts{} // a fresh count once the quarantine is over
		p.s.log(slog.LevelWarn, "granary: activation keeps failing; identity refused", withStack([]any{"grain", a.ID.String(), "for", backoff, "err", aerr.Err}, aerr.Err)...)
	}
	f.until, f.err, f.last = p.now+backoff, aerr, p.now
}

// refusedAfterFailures dead-letters env if its target's activation failed
// lately and is still backing off.
func (p *partition) refusedAfterFailures(env *queues.Envelope) bool {
	f := p.actFails[env.Target]
	if f == nil || p.now >= f.until {
		return false
	}
	p.s.deadLetter(*env, grain.ReasonActivationFailed, f.err)
	return true
}

// activationSucceeded ends id's failure streak.
func (p *partition) activationSucceeded(id grain.ID) {
	if p.actFails != nil {
		delete(p.actFails, id)
	}
}

// forgetActivationFailures drops the streaks that are over: refused no
// more, and with no failure left in their kind's window. Called each idle
// tick.
func (p *partition) forgetActivationFailures() {
	for id, f := range p.actFails {
		if p.now >= f.until && p.now-f.last >= p.s.kinds[id.Kind()].sup.Window {
			delete(p.actFails, id)
		}
	}
	if len(p.actFails) == 0 {
		p.actFails = nil
	}
}
