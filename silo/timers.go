package silo

import (
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/queues"
)

// grainTimer is one running timer of an activation. Owner state.
type grainTimer struct {
	period time.Duration
	msg    any
	t      clock.Timer
	tick   *queues.Tick
	meta   *queues.Meta // the envelope metadata of every tick: made once
}

// applyTimers carries out the timer starts and stops a turn asked for.
func (p *partition) applyTimers(a *act, ops []timerOp) {
	for _, op := range ops {
		x := a.extra()
		if old := x.timers[op.name]; old != nil {
			old.t.Stop()
			delete(x.timers, op.name)
		}
		if op.stop || a.State() != activation.Active || p.mode != modeRunning {
			continue
		}
		p.timerSeq++
		gt := &grainTimer{period: op.period, msg: op.msg, tick: &queues.Tick{Name: op.name, Seq: p.timerSeq}}
		gt.meta = &queues.Meta{Tick: gt.tick, MayInterleave: op.letIn}
		if x.timers == nil {
			x.timers = make(map[string]*grainTimer)
		}
		x.timers[op.name] = gt
		p.schedule(a, gt, op.due)
	}
}

func (p *partition) schedule(a *act, gt *grainTimer, d time.Duration) {
	gt.t = p.s.after(d, func() { p.q.PushControl(ctl{op: opTimer, a: a, tm: gt}) })
}

// fire delivers a timer's tick as a message to its grain, behind whatever
// waits for the grain, unless the timer was stopped or replaced meanwhile.
func (p *partition) fire(w *worker, c ctl) bool {
	a := c.a
	h := a.ID.Hash()
	if cur, ok := p.dir.Get(a.ID, h); !ok || cur != a || a.extra().timers[c.tm.tick.Name] != c.tm {
		return true
	}
	if a.State() != activation.Active || a.wantsDeactivate() || a.isStopping() || p.mode != modeRunning {
		return true // a grain on its way out takes no more ticks
	}
	return p.enqueue(w, a, &queues.Envelope{Target: a.ID, Hash: h, Msg: c.tm.msg, Meta: c.tm.meta})
}

// tickDone schedules a repeating timer's next tick once the tick's turn has
// finished, so ticks never pile up behind a slow grain (the period counts
// from the end of a tick, as in Orleans).
func (p *partition) tickDone(a *act, tick *queues.Tick) {
	x := a.extra()
	gt := x.timers[tick.Name]
	if gt == nil || gt.tick != tick {
		return
	}
	if gt.period <= 0 || a.State() != activation.Active || p.mode != modeRunning {
		delete(x.timers, tick.Name)
		return
	}
	p.schedule(a, gt, gt.period)
}

func (p *partition) stopTimers(a *act) {
	x := a.x.Load()
	if x == nil {
		return
	}
	for _, gt := range x.timers {
		gt.t.Stop()
	}
	x.timers = nil
}
