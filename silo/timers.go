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
		if old := a.timers[op.name]; old != nil {
			old.t.Stop()
			delete(a.timers, op.name)
		}
		if op.stop || a.State() != activation.Active || p.mode != modeRunning {
			continue
		}
		p.gen++
		gt := &grainTimer{period: op.period, msg: op.msg, tick: &queues.Tick{Name: op.name, Seq: p.gen}}
		gt.meta = &queues.Meta{Tick: gt.tick}
		if a.timers == nil {
			a.timers = make(map[string]*grainTimer)
		}
		a.timers[op.name] = gt
		p.schedule(a, gt, op.due)
	}
}

func (p *partition) schedule(a *act, gt *grainTimer, d time.Duration) {
	gen := a.gen
	gt.t = p.s.after(d, func() { p.q.PushControl(ctl{op: opTimer, a: a, gen: gen, tm: gt}) })
}

// fire delivers a timer's tick as a message to its grain, behind whatever
// waits for the grain, unless the timer was stopped or replaced meanwhile.
func (p *partition) fire(w *worker, c ctl) bool {
	a := c.a
	if cur, ok := p.dir.Get(a.ID, a.hash); !ok || cur != a || a.gen != c.gen || a.timers[c.tm.tick.Name] != c.tm {
		return true
	}
	if a.State() != activation.Active || p.mode != modeRunning {
		return true
	}
	return p.enqueue(w, a, queues.Envelope{Target: a.ID, Hash: a.hash, Msg: c.tm.msg, Meta: c.tm.meta})
}

// tickDone schedules a repeating timer's next tick once the tick's turn has
// finished, so ticks never pile up behind a slow grain (the period counts
// from the end of a tick, as in Orleans).
func (p *partition) tickDone(a *act, tick *queues.Tick) {
	gt := a.timers[tick.Name]
	if gt == nil || gt.tick != tick {
		return
	}
	if gt.period <= 0 || a.State() != activation.Active || p.mode != modeRunning {
		delete(a.timers, tick.Name)
		return
	}
	p.schedule(a, gt, gt.period)
}

func (p *partition) stopTimers(a *act) {
	for _, gt := range a.timers {
		gt.t.Stop()
	}
	a.timers = nil
}
