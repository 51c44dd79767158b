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
	// calls counts what the grains send each other, on the senders' side
	// (a send filter, beside this turn filter)
	calls *callMeter
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
	m := &turnMeter{kinds: make(map[string]*kindTurns, len(kinds)), calls: newCallMeter(kinds...)}
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

// callMeter is a grain.SendFilter that counts the messages grains send
// each other, by the sender's kind and the target's: how many, and the
// longest an ask waited as its caller saw it — the queueing and the
// callee's turn together, which a Filter around the callee's turn does
// not see. Made once for the game's kinds; atomics, as turnMeter's.
type callMeter struct {
	pairs map[[2]string]*kindCalls // read-only after newCallMeter
}

type kindCalls struct {
	sends, asks atomic.Int64
	longest     atomic.Int64 // nanoseconds, of an ask
}

// KindCalls is one pair of kinds' line of a callMeter's report.
type KindCalls struct {
	From    string        `json:"from"`
	To      string        `json:"to"`
	Sends   int64         `json:"sends"`
	Asks    int64         `json:"asks"`
	Longest time.Duration `json:"longest_ask_ns"`
}

func newCallMeter(kinds ...string) *callMeter {
	m := &callMeter{pairs: make(map[[2]string]*kindCalls, len(kinds)*(len(kinds)+1))}
	for _, from := range kinds {
		for _, to := range append(kinds, grain.ObserverKind) {
			m.pairs[[2]string{from, to}] = &kindCalls{}
		}
	}
	return m
}

// Send sends the message on and counts it.
func (m *callMeter) Send(ctx context.Context, s grain.Send, next grain.SendNext) (any, error) {
	start := time.Now()
	reply, err := next(ctx, s)
	if k := m.pairs[[2]string{s.From.Kind(), s.To.Kind()}]; k != nil {
		k.sends.Add(1)
		if s.Ask {
			k.asks.Add(1)
			d := int64(time.Since(start))
			for old := k.longest.Load(); d > old && !k.longest.CompareAndSwap(old, d); old = k.longest.Load() {
			}
		}
	}
	return reply, err
}

// Report returns the pairs of kinds that sent anything, by sender, then
// target.
func (m *callMeter) Report() []KindCalls {
	r := []KindCalls{} // none yet encodes as [], as Report's turns do
	for pair, k := range m.pairs {
		if n := k.sends.Load(); n > 0 {
			r = append(r, KindCalls{From: pair[0], To: pair[1], Sends: n, Asks: k.asks.Load(), Longest: time.Duration(k.longest.Load())})
		}
	}
	slices.SortFunc(r, func(a, b KindCalls) int {
		if c := strings.Compare(a.From, b.From); c != 0 {
			return c
		}
		return strings.Compare(a.To, b.To)
	})
	return r
}

func (r KindCalls) String() string {
	to := r.To
	if to == grain.ObserverKind {
		to = "observers"
	}
	if r.Asks == 0 {
		return fmt.Sprintf("%s -> %s %d", r.From, to, r.Sends)
	}
	return fmt.Sprintf("%s -> %s %d (%d asks, the longest %v)", r.From, to, r.Sends, r.Asks, r.Longest.Round(time.Microsecond))
}
