package silo

import (
	"context"
	"log/slog"
	"time"

	"github.com/granary-go/granary/grain"
)

// A graceful Shutdown in two steps. First the silo settles: sends from
// outside are refused, timers stop, and the work under way finishes — the
// messages queued, the turns running, and what those turns send other
// grains: the calls they wait for, and the tells that carry their work on
// (a request that updates a leaderboard by a tell would otherwise lose the
// update). The silo has settled when every partition is quiet at once:
// nothing queued, no turn running, no message waiting in a mailbox. Only a
// running turn can make more work then, and its partition is not quiet
// while it runs; a message it sends counts its target's partition busy
// before the send returns (queues.Queue.MarkIdle). Then every grain is
// deactivated (modeDraining), and nothing more is taken, sends from
// OnDeactivate included: grains deactivate in no order, so the grain sent
// to might be gone. The settling is bounded (boundSettling): work that
// makes work for ever (a grain that tells itself) or a turn stuck in a
// handler holds it up only so long; then the others deactivate without it.

// admitSend is admit for a Tell or an Ask: one refused because the silo is
// stopping is still taken if it comes from a turn of this silo while the
// silo settles (push then finds the queue restricted, and pushes it late).
//
// A running silo's sends take the short way, admit's checks in one frame:
// each call between here and checkTarget passed the 48-byte ID on again.
func (s *Silo) admitSend(ctx context.Context, id grain.ID, msg any) (*partition, *kind, uint64, error) {
	if s != nil && ctx != nil && s.state.Load() == stateRunning {
		if ctx.Err() != nil { // inline: s.ctxErr is a call, on every send
			if err := s.ctxErr(ctx); err != nil { // read again: a ctx of a user's may say nil now
				return nil, nil, 0, err
			}
		}
		return s.checkTarget(id, msg)
	}
	p, k, h, err := s.admit(ctx, id, msg)
	if err == grain.ErrSiloClosed && s.lateSend(turnFrom(ctx)) {
		return s.checkTarget(id, msg)
	}
	return p, k, h, err
}

// lateSend reports whether a send comes from a turn of this silo while it
// settles.
func (s *Silo) lateSend(ti *turnInfo) bool {
	return ti != nil && ti.w.p.s == s && s.settling.Load()
}

// settle counts the partition out of the busy ones if it is quiet, and
// ends the settling if it was the last. The owner calls it at the end of
// each round while the silo settles.
func (p *partition) settle() {
	if p.rhead < len(p.ready) || p.waitedFor() > 0 || p.backlog.Load() > 0 {
		p.noteKeptBusy()
		return
	}
	switch marked, last := p.q.MarkIdle(); {
	case last:
		p.s.settled(false)
	case !marked:
		p.noteKeptBusy()
	case p.s.settling.Load():
		// Quiet: what kept it busy is done. Not once the bound has ended
		// the settling (unsettled.go): a grain that told itself until its
		// tell was refused left the partition quiet as its report came.
		p.keptBusy = p.keptBusy[:0]
	}
}

// settled ends the settling: every partition deactivates its grains.
// timedOut: its bound ended it, with work still under way.
func (s *Silo) settled(timedOut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.settling.Load() {
		return // a Close came first, or another owner saw the end too
	}
	if s.settleBound != nil {
		s.settleBound.Stop()
	}
	drain := ctl{op: opDrain}
	if timedOut {
		drain.ahead = 1
	}
	// The drains are queued before the turns' calls are refused: a turn
	// that ends because its next call was refused then reports to its
	// owner after the drain, and the drain's report (reportUnsettled)
	// names it among the running. Refused first, a turn that called in a
	// loop could end before its owner read the drain, and the report lost
	// it (1 run in 30 of TestShutdownEndsWorkThatNeverEnds beside a CPU
	// hog).
	for _, p := range s.parts {
		p.q.PushControl(drain)
	}
	s.settling.Store(false)
}

// boundSettling ends the settling, if it has not ended by itself, after
// Config.DeactivationTimeout or half the time ctx leaves, whichever comes
// first (read now: ctx is not kept). A turn that holds the silo up longer
// is taken as stuck: the other grains then deactivate — saving their
// state — while it goes on, and its calls from then on are refused, as a
// Shutdown did before it settled. Without the bound, one stuck handler
// would keep every grain from deactivating until ctx's end, when Close
// runs no OnDeactivate at all.
func (s *Silo) boundSettling(ctx context.Context) {
	d := s.cfg.DeactivationTimeout
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)/2)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settling.Load() { // else it has settled already, or a Close came
		s.settleBound = time.AfterFunc(d, func() { s.settleTimedOut(d) })
	}
}

// settleTimedOut ends a settling that took too long, and says so: the
// work still under way is taken as never ending — a turn stuck in its
// handler, grains that keep sending each other work — and the grains
// deactivate while it goes on. Each partition that was not quiet names
// what kept it busy (partition.reportUnsettled).
func (s *Silo) settleTimedOut(after time.Duration) {
	if s.settling.Load() {
		s.log(slog.LevelWarn, "granary: Shutdown's work did not settle in time; deactivating the grains while it goes on",
			"after", after)
	}
	s.settled(true)
}
