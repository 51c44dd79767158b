package silo

import (
	"sync/atomic"

	"github.com/granary-go/granary/grain"
)

// Checked contexts (Config.CheckContexts): each turn gets a grain.Context
// of its own, which panics once the turn has ended (grain.Context.Check),
// instead of the worker's, which the next turn reuses — so a handler that
// hands its gc to a goroutine outliving the turn fails loudly in a test,
// rather than have that goroutine read another grain's identity (or start
// a timer on another grain) in production. One allocation a turn.

// checkedContext gives the turn w is about to run a checked Context of
// its own, for a with sender.
func (w *worker) checkedContext(a *act, sender *grain.ID) {
	c := new(checkedGC)
	c.gc.Set(&a.ID, sender, w.p.s.rt, a)
	c.gc.Check(&c.over)
	w.cur, w.gcOver = &c.gc, &c.over
}

// checkedGC is a turn's checked Context and the flag that ends it, in one
// allocation.
type checkedGC struct {
	gc   grain.Context
	over atomic.Bool
}

// endContext ends the checked Context of the turn w ran, if it had one:
// from here on, its every method panics. Called where the turn's ctx is
// released, on the turn's goroutine.
func (w *worker) endContext() {
	if w.gcOver != nil {
		w.gcOver.Store(true)
		w.gcOver = nil
	}
}
