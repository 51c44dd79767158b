package silo

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"

	"github.com/granary-go/granary/grain"
)

// What kept a Shutdown from settling. A settling its bound ends
// (Silo.boundSettling) had work that did not end: a turn stuck in its
// handler, or grains that keep sending work — one that tells itself, two
// that bounce a message for ever. Each partition still busy then names
// them in one line, so that the operator whose Shutdown took its whole
// bound learns which grains to look at: the ones running a turn, and the
// ones its rounds kept running last as they left it busy (a grain that
// tells itself runs last in every round; its own messages never let the
// partition go quiet).

// keptBusy is a grain that ran last in rounds of the settling that left
// its partition busy, and how many.
type keptBusy struct {
	a      *act
	rounds int
}

// keptBusyMax bounds the grains a partition keeps count of while it
// settles. When they are all taken, a new one replaces the one with the
// fewest rounds and takes its count, plus one (the Space-Saving count of
// frequent items): a grain last in more than one round in keptBusyMax is
// never lost among the ones that finished their work.
const keptBusyMax = 8

// noteKeptBusy counts the round that just ended, which left the partition
// busy, for the grain that ran last in it. The owner calls it at the end
// of such a round while the silo settles; never on the message path.
func (p *partition) noteKeptBusy() {
	a := p.lastRan
	if a == nil {
		return
	}
	low := -1
	for i := range p.keptBusy {
		k := &p.keptBusy[i]
		if k.a == a {
			k.rounds++
			return
		}
		if low < 0 || k.rounds < p.keptBusy[low].rounds {
			low = i
		}
	}
	if len(p.keptBusy) < keptBusyMax {
		p.keptBusy = append(p.keptBusy, keptBusy{a: a, rounds: 1})
		return
	}
	p.keptBusy[low] = keptBusy{a: a, rounds: p.keptBusy[low].rounds + 1}
}

// unsettledNames is how many grains of each sort reportUnsettled names.
const unsettledNames = 8

// reportUnsettled logs what keeps the partition busy as the settling's
// bound ends it: the grains running a turn (stuck, or waiting in calls),
// those its rounds kept running last, and how many messages wait. A
// partition that was quiet at the bound says nothing. The owner reads its
// opDrain a round or more after the bound, when a grain that told itself
// may have stopped (its tell refused, as the settling ended): what the
// rounds kept running is kept from the bound on (settle) for this.
func (p *partition) reportUnsettled() {
	queued := p.q.Len() + p.batchLeft() + int(p.backlog.Load())
	if len(p.keptBusy) == 0 && p.waitedFor() == 0 && p.rhead == len(p.ready) && queued == 0 {
		return
	}
	var running []string
	more := 0
	p.dir.All(func(_ grain.ID, a *act) bool {
		if a.busy() {
			if len(running) < unsettledNames {
				running = append(running, a.ID.String())
			} else {
				more++
			}
		}
		return true
	})
	if more > 0 {
		running = append(running, fmt.Sprintf("and %d more", more))
	}
	// Sorted in place: the drain that called this drops them next.
	slices.SortStableFunc(p.keptBusy, func(x, y keptBusy) int { return cmp.Compare(y.rounds, x.rounds) })
	sending := make([]string, 0, len(p.keptBusy))
	for _, k := range p.keptBusy {
		sending = append(sending, fmt.Sprintf("%v (%d rounds)", k.a.ID, k.rounds))
	}
	p.s.log(slog.LevelWarn, "granary: still working as Shutdown's settling ended",
		"running", running, "kept_busy", sending, "queued", queued)
}
