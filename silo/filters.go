package silo

import (
	"context"

	"github.com/granary-go/granary/grain"
)

// Filters: a kind's grain.Filters run around each message turn of its
// grains, the silo's (Config.Filters) outermost, then the kind's own
// (WithFilters).

// WithFilters adds filters that run around every message turn of the
// kind's grains, inside the silo's Config.Filters, the first outermost.
// Register refuses a nil filter with ErrInvalidConfig.
func WithFilters(fs ...grain.Filter) KindOption {
	return func(k *kind) { k.filters = append(k.filters, fs...) }
}

// filterChain is a worker's chain of filters around the grain of the turn
// it runs. A worker makes it for its first filtered turn (not with the
// worker: every handoff makes a worker, and most kinds have no filters)
// and reuses it from turn to turn, so a filtered turn allocates nothing:
// next, for each filter, is a link into it. A worker runs one turn at a
// time (an interleaved turn, or the new owner after a handoff, has a
// worker of its own), which is why the chain can be reused — and why a
// filter must not keep next past its turn.
type filterChain struct {
	fs    []grain.Filter
	g     grain.Grain
	links []filterLink // at least len(fs)+1; grown, never shrunk
}

// filterLink is the rest of the turn from filter i on: filter i, or the
// grain once the filters are done.
type filterLink struct {
	c *filterChain
	i int
}

// Receive runs filter i with the next link, or the grain.
func (l *filterLink) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	c := l.c
	if l.i >= len(c.fs) {
		return c.g.Receive(ctx, gc, msg)
	}
	return c.fs[l.i].Intercept(ctx, gc, msg, &c.links[l.i+1])
}

// receiver returns what a message turn of a runs: the grain itself, or its
// kind's filters around it.
func (w *worker) receiver(a *act) grain.Grain {
	fs := a.k.filters
	if len(fs) == 0 {
		return a.g
	}
	c := w.chain
	if c == nil {
		c = &filterChain{}
		w.chain = c
	}
	c.fs, c.g = fs, a.g
	if len(c.links) <= len(fs) {
		c.links = make([]filterLink, len(fs)+1)
		for i := range c.links {
			c.links[i] = filterLink{c: c, i: i}
		}
	}
	return &c.links[0]
}

// endFiltered lets go of the grain a filtered turn ran, so that a worker
// does not keep a deactivated grain alive until its next filtered turn.
func (w *worker) endFiltered() {
	if w.chain != nil {
		w.chain.g = nil
	}
}
