package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/grain"
)

// turnMeter is a grain.Filter that counts every grain's message turns by
// kind: their number, how many returned an error (a Join refused as busy is
// one), and the longest — what a metrics exporter would hook in, without a
// line in the grains. One meter runs on every partition at once, so its
// counters are atomics, made once for the game's kinds.
type turnMeter struct {
	kinds map[string]*kindTurns // read-only after newTurnMeter
}

type kindTurns struct {
	turns, errs atomic.Int64
	longest     atomic.Int64 // nanoseconds
}

// KindTurns is one kind's line of a meter's report.
type KindTurns struct {
	Kind    string        `json:"kind"`
	Turns   int64         `json:"turns"`
	Errors  int64         `json:"errors"`
	Longest time.Duration `json:"longest_ns"`
}

func newTurnMeter(kinds ...string) *turnMeter {
	m := &turnMeter{kinds: make(map[string]*kindTurns, len(kinds))}
	for _, k := range kinds {
		m.kinds[k] = &kindTurns{}
	}
	return m
}

// Intercept runs the turn and counts it.
func (m *turnMeter) Intercept(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
	start := time.Now()
	reply, err := next.Receive(ctx, c, msg)
	if k := m.kinds[c.ID().Kind()]; k != nil {
		k.turns.Add(1)
		if err != nil {
			k.errs.Add(1)
		}
		d := int64(time.Since(start))
		for old := k.longest.Load(); d > old && !k.longest.CompareAndSwap(old, d); old = k.longest.Load() {
		}
	}
	return reply, err
}

// Report returns each kind's counts, by kind name.
func (m *turnMeter) Report() []KindTurns {
	r := make([]KindTurns, 0, len(m.kinds))
	for name, k := range m.kinds {
		r = append(r, KindTurns{Kind: name, Turns: k.turns.Load(), Errors: k.errs.Load(), Longest: time.Duration(k.longest.Load())})
	}
	slices.SortFunc(r, func(a, b KindTurns) int { return strings.Compare(a.Kind, b.Kind) })
	return r
}

func (r KindTurns) String() string {
	return fmt.Sprintf("%s %d (%d answered with an error, longest %v)", r.Kind, r.Turns, r.Errors, r.Longest.Round(time.Microsecond))
}
