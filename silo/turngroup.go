package silo

import (
	"sync"
	"sync/atomic"
)

// turnGroup counts the turns running off their partitions, as a WaitGroup
// would, and can also say, without waiting, whether none is left: a stop
// that does not wait for them must not warn of turns that have all ended.
// Added to only when a turn leaves its partition (a handoff, an interleaved
// turn), never on the message path.
type turnGroup struct {
	wg sync.WaitGroup
	n  atomic.Int64
}

func (g *turnGroup) Add(d int) {
	g.n.Add(int64(d))
	g.wg.Add(d)
}

func (g *turnGroup) Done() {
	g.n.Add(-1)
	g.wg.Done()
}

func (g *turnGroup) Wait() { g.wg.Wait() }

// none reports whether no turn is counted now.
func (g *turnGroup) none() bool { return g.n.Load() == 0 }
