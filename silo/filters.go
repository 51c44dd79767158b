package silo

import (
	"context"

	"github.com/granary-go/granary/activation"
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
//
// One that does anyway — a filter that hands next to a goroutine and
// returns — is refused with grain.ErrNextOutsideTurn rather than let into
// a grain outside its turn: between turns the chain has no grain (g is
// nil), and within one a link is entered only from the filter before it,
// the links under way (depth) one fewer than its place, so a late call
// while another turn is inside its grain or a later filter does not match
// either. One that lands while another turn's filter i-1 runs its own
// code, outside its next, is not told apart: the reuse that makes a
// filtered turn free has no name for the turn a link was handed out in.
// The fields are plain words: only such a misuse reads them from another
// goroutine, and the race detector then names it.
type filterChain struct {
	// fs points at the turn's kind's filters, and g at the turn's grain
	// (its activation's own field), one word each: a late reader sees
	// each whole, a slice or an interface of one turn, never half of
	// another's; g is nil between turns
	fs *[]grain.Filter
	g  *grain.Grain
	// turn counts the chain's turns, moved on as each begins (a word,
	// whole to a late reader on 32-bit platforms too): a link that
	// returns after its turn ended leaves the next turn's depth alone —
	// between turns depth is unread, and the next turn sets it afresh
	turn uintptr
	// depth is the index of the innermost link under way, -1 before the
	// first: link i may be entered only at depth i-1
	depth int
	links []filterLink // at least len(fs)+1; grown, never shrunk
}

// filterLink is the rest of the turn from filter i on: filter i, or the
// grain once the filters are done. next is the link after it, nil for the
// last of its array: a link keeps its own, so that a late call never reads
// the chain's slice of links as it grows.
type filterLink struct {
	c    *filterChain
	i    int
	next *filterLink
}

// Receive runs filter i with the next link, or the grain.
func (l *filterLink) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	c := l.c
	g, turn := c.g, c.turn
	if g == nil || c.depth != l.i-1 {
		return nil, grain.ErrNextOutsideTurn
	}
	c.depth = l.i
	defer c.leave(turn, l.i-1) // a filter that recovers a panic of next's may call it again
	fs := *c.fs
	var reply any
	var err error
	if l.i >= len(fs) {
		reply, err = (*g).Receive(ctx, gc, msg)
	} else if l.next == nil { // a late link of a shorter chain, since grown
		return nil, grain.ErrNextOutsideTurn
	} else {
		reply, err = fs[l.i].Intercept(ctx, gc, msg, l.next)
	}
	if err != nil {
		// A typed nil stops here, before the filter outside this link
		// wraps it into an error that errors.As would walk into
		// (activation.Run checks only what the outermost returns).
		err = activation.CheckError(gc.ID(), err)
	}
	return reply, err
}

// leave steps the chain back out of a link, if its turn still runs.
func (c *filterChain) leave(turn uintptr, depth int) {
	if c.turn == turn {
		c.depth = depth
	}
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
	c.fs, c.g, c.depth = &a.k.filters, &a.g, -1
	c.turn++
	if len(c.links) <= len(fs) {
		c.links = make([]filterLink, len(fs)+1)
		for i := range c.links {
			c.links[i] = filterLink{c: c, i: i}
			if i > 0 {
				c.links[i-1].next = &c.links[i]
			}
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
