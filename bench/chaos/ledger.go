package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// ledger keeps what became of every message the run sent: each hop is
// handled by a turn, or becomes a dead letter, or — an ask only — fails
// before either (its caller's ctx ended, its send was refused). A hop seen
// twice is a message doubled; a tell seen never, once the silo has shut
// down, is one lost; an ask whose caller waited for its whole deadline is
// a deadlock nothing failed. Safe for concurrent use.
type ledger struct {
	next atomic.Uint64 // the last hop ID given out

	mu      sync.Mutex
	sent    map[uint64]sentHop // every hop sent, by ID
	handled map[uint64]int     // turns run per hop
	dead    map[uint64]int     // dead letters per hop
	deadBy  map[string]int     // dead letters by reason
	out     map[string]int     // how asks ended, by outcome
	flying  map[uint64]flight  // asks under way, by hop ID
	running map[uint64]string  // turns under way: hop ID to grain
	// roots: every hook's and tick's turn, by ID, to what hookTurn was
	// given ("tick:" and the grain): the root of its calls' chains
	roots map[uint64]string
	// nObserved: hops read by observers, each also counted in handled
	nObserved int
	// controls: how the Stops and Deactivates of -stop and -deactout
	// ended, by call and outcome ("stop:ok")
	controls       map[string]int
	failedControls int // of those, the ones that broke a promise
	// brokenHooks: what hooks saw that broke a promise (-acthang: a timer
	// taken from an OnActivate the silo gave up on), a few of them
	brokenHooks  []string
	nBrokenHooks int
	// hung: hooks that hung past their bound (-acthang, -deacthang)
	hung int
	// slowest: the longest an ask under a client's deadline (a hop's, not
	// a hook's or a tick's) took that ended other than at that deadline —
	// one near it says the timeouts of a run may be asks as slow, not
	// stuck (rerun with a longer -deadline: a deadlock never ends)
	slowest time.Duration

	progress atomic.Uint64 // turns run and asks ended: a stall is none for a while

	// clock orders what the ledger sees of sends and turns: a hop's send
	// begins and ends, and its turn starts, each at a tick of it. A send
	// that ended before another began pushed its hop first (the ticks are
	// atomic: one's Add happens before the next's), and for a grain that
	// keeps order, its turn starts first (see order).
	clock atomic.Uint64
}

// sentHop is what the ledger knows of a hop: how it was sent and, if its
// turn began, when.
type sentHop struct {
	tell bool   // a tell: it must be handled or be a dead letter
	key  string // the sender and the target, for a report
	to   string // the target
	// parent: the hop whose turn sent it — 0 from a client, a hook's or
	// a tick's turn's ID (no hop's) from those
	parent uint64
	// ordered: the target keeps its senders' order — a grain, not a
	// stateless worker's (its activations run side by side) or an
	// observer; taken: the target's WithMayInterleave predicate takes it
	ordered, taken bool
	// begin and end: the clock as the send began and once it returned
	// (an ask's once its reply came or it failed: later than its push,
	// which only makes the check looser); 0 until then
	begin, end uint64
	started    uint64 // the clock as its turn began; 0: none began
	outcome    string // how an ask ended, once it has
}

func newLedger() *ledger {
	return &ledger{
		sent:     make(map[uint64]sentHop),
		handled:  make(map[uint64]int),
		dead:     make(map[uint64]int),
		deadBy:   make(map[string]int),
		out:      make(map[string]int),
		flying:   make(map[uint64]flight),
		running:  make(map[uint64]string),
		roots:    make(map[uint64]string),
		controls: make(map[string]int),
	}
}

// send records a hop about to be sent to to by the turn of hop parent (0:
// by a client; a hook's or tick's turn's ID: by that) and gives its ID;
// key names the sender and the target for a report.
func (l *ledger) send(tell bool, to grain.ID, parent uint64, key string) uint64 {
	id := l.next.Add(1)
	l.mu.Lock()
	l.sent[id] = sentHop{tell: tell, key: key, to: to.String(), parent: parent, ordered: keepsOrder(to.Kind())}
	l.mu.Unlock()
	return id
}

// keepsOrder says whether kind's grains handle what they are sent in the
// order it was sent (docs/architecture.md, "Order"): every kind's but a
// stateless worker's, whose activations run side by side.
func keepsOrder(kind string) bool {
	switch kind {
	case "plain", "reent", "mayin", "chain", "blk", "reblk":
		return true
	}
	return false
}

// sending records that hop id's send begins, taken saying whether its
// target's WithMayInterleave predicate takes it; sentOff, that it
// returned.
func (l *ledger) sending(id uint64, taken bool) {
	l.stamp(id, func(h *sentHop, t uint64) { h.begin, h.taken = t, taken })
}
func (l *ledger) sentOff(id uint64) { l.stamp(id, func(h *sentHop, t uint64) { h.end = t }) }

// stamp sets a tick of the clock in hop id's record.
func (l *ledger) stamp(id uint64, set func(*sentHop, uint64)) {
	l.mu.Lock()
	h := l.sent[id]
	set(&h, l.clock.Add(1))
	l.sent[id] = h
	l.mu.Unlock()
}

// turn records a turn of grain g that received hop id; end, when it ends.
func (l *ledger) turn(id uint64, g string) {
	l.mu.Lock()
	l.handled[id]++
	l.running[id] = g
	if h, ok := l.sent[id]; ok && h.started == 0 {
		h.started = l.clock.Add(1)
		l.sent[id] = h
	}
	l.mu.Unlock()
	l.progress.Add(1)
}

// observed records hop id read by an observer: handled, by no grain.
func (l *ledger) observed(id uint64) {
	l.mu.Lock()
	l.handled[id]++
	l.nObserved++
	l.mu.Unlock()
	l.progress.Add(1)
}

// hookTurn records a turn that is no hop's — a hook's, a tick's — and gives
// the ID its calls name as their parent; end it with turnEnded.
func (l *ledger) hookTurn(g string) uint64 {
	id := l.next.Add(1)
	l.mu.Lock()
	l.running[id] = g
	l.roots[id] = g
	l.mu.Unlock()
	return id
}

func (l *ledger) turnEnded(id uint64) {
	l.mu.Lock()
	delete(l.running, id)
	l.mu.Unlock()
}

// flight is an ask under way: where it was sent from — the hop whose turn
// sent it, or a hook or a tick — and to whom.
type flight struct {
	from, to string
	parent   uint64 // the sending turn's hop; 0 for a hook's, a tick's or a client's
	where    string
	since    time.Time
	// mayIn: the target is a WithMayInterleave grain whose predicate takes
	// the hop (the dump says so: such an ask may be let in beside a
	// waiting turn)
	mayIn bool
}

// asking records an ask about to be sent; the ask's end takes it off.
func (l *ledger) asking(id uint64, f flight) {
	l.mu.Lock()
	l.flying[id] = f
	l.mu.Unlock()
}

// writeFlights writes the asks under way, the oldest first, each with
// whether its turn runs: a stuck run's wait-for graph.
func (l *ledger) writeFlights(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := slices.Collect(maps.Keys(l.flying))
	slices.SortFunc(ids, func(a, b uint64) int { return l.flying[a].since.Compare(l.flying[b].since) })
	now := time.Now()
	fmt.Fprintf(w, "%d asks under way, the oldest first: hop, age, from (its turn's hop), to, the ask's turn\n", len(ids))
	for _, id := range ids {
		f := l.flying[id]
		state := "not begun"
		if g, ok := l.running[id]; ok {
			state = "running in " + g
		} else if l.handled[id] > 0 {
			state = "ended"
		}
		if f.mayIn {
			state += " (may interleave)"
		}
		fmt.Fprintf(w, "%d %v %s%s (%d) -> %s: %s\n", id, now.Sub(f.since).Round(time.Millisecond), f.where, f.from, f.parent, f.to, state)
	}
	turns := slices.Sorted(maps.Keys(l.running))
	fmt.Fprintf(w, "\n%d turns under way: hop (or a hook's or tick's turn), grain: what it handles\n", len(turns))
	for _, id := range turns {
		how := "ask"
		if h, ok := l.sent[id]; !ok {
			how = "hook or tick"
		} else if h.tell {
			how = "tell " + h.key
		}
		fmt.Fprintf(w, "%d %s: %s\n", id, l.running[id], how)
	}
}

// deadLetter records a dead letter of hop id, why being its reason (or
// "refused": a tell refused at its send, which is none).
func (l *ledger) deadLetter(id uint64, why string) {
	l.mu.Lock()
	l.dead[id]++
	l.deadBy[why]++
	l.mu.Unlock()
}

// controlled records how a Stop or a Deactivate (what) ended: nil, the
// silo closed under it (a turn's, as the silo shuts down), or its ctx
// ended first (a turn's whose caller gave up, or whose fan-out took its
// first reply), as a Tell's would; any other error breaks a promise — both
// take any grain of a registered kind.
func (l *ledger) controlled(what string, err error) {
	out, failed := "ok", false
	switch {
	case err == nil:
	case errors.Is(err, silo.ErrSiloClosed):
		out = "closed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		out = "cancelled"
	default:
		out, failed = "failed: "+err.Error(), true
	}
	l.mu.Lock()
	l.controls[what+":"+out]++
	if failed {
		l.failedControls++
	}
	l.mu.Unlock()
}

// hookHung records a hook that hangs past its bound.
func (l *ledger) hookHung() {
	l.mu.Lock()
	l.hung++
	l.mu.Unlock()
}

// brokenHook records a broken promise a hook saw, what saying which.
func (l *ledger) brokenHook(what string) {
	l.mu.Lock()
	l.nBrokenHooks++
	if len(l.brokenHooks) < 5 {
		l.brokenHooks = append(l.brokenHooks, what)
	}
	l.mu.Unlock()
}

// ended records how ask id ended.
func (l *ledger) ended(id uint64, outcome string) {
	l.mu.Lock()
	if f, ok := l.flying[id]; ok && f.where == "" && outcome != outcomeTimeout {
		l.slowest = max(l.slowest, time.Since(f.since))
	}
	delete(l.flying, id)
	if h, ok := l.sent[id]; ok {
		h.outcome = outcome
		l.sent[id] = h
	}
	l.out[outcome]++
	l.mu.Unlock()
	l.progress.Add(1)
}

// verdict is the ledger's account once the silo has shut down.
type verdict struct {
	hops, tells     int
	lost, doubled   []string // a few examples of each
	nLost, nDoubled int
	// disordered: hops whose turn began before that of a hop to the same
	// grain whose send had returned before theirs began (a few)
	disordered        []string
	nDisordered       int
	inOrder           int // hops whose order was checked
	outcomes          map[string]int
	timeouts, handled int
	slowest           time.Duration // the longest an ask took that did not time out
	controls          map[string]int
	badControls       int      // Stops and Deactivates that failed but for a closed silo or an ended ctx
	badHooks          []string // a few broken promises hooks saw
	nBadHooks         int
	hung              int            // hooks that hung past their bound
	deadBy            map[string]int // dead letters by reason
	observed          int            // hops read by observers
}

func (l *ledger) verdict() verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := verdict{hops: len(l.sent), outcomes: maps.Clone(l.out), slowest: l.slowest,
		controls: maps.Clone(l.controls), badControls: l.failedControls, deadBy: maps.Clone(l.deadBy), observed: l.nObserved,
		badHooks: slices.Clone(l.brokenHooks), nBadHooks: l.nBrokenHooks, hung: l.hung}
	for k, n := range l.out {
		if strings.HasSuffix(k, outcomeTimeout) {
			v.timeouts += n // a hook's or a tick's call left to its deadline too
		}
	}
	for id, h := range l.sent {
		seen := l.handled[id] + l.dead[id]
		v.handled += l.handled[id]
		if h.tell {
			v.tells++
		}
		switch {
		case seen > 1:
			v.nDoubled++
			if len(v.doubled) < 5 {
				v.doubled = append(v.doubled, fmt.Sprintf("hop %d (%s): %d turns, %d dead letters", id, h.key, l.handled[id], l.dead[id]))
			}
		case seen == 0 && h.tell:
			v.nLost++
			if len(v.lost) < 5 {
				v.lost = append(v.lost, fmt.Sprintf("tell %d (%s)", id, h.key))
			}
		}
	}
	l.order(&v)
	return v
}

// order checks every grain's order: of two hops to a grain that keeps its
// senders' order, each handled once, the one whose send returned before
// the other's began has its turn begin first — whoever sent them, since a
// grain's messages reach it in the order they were pushed
// (docs/architecture.md, "Order"). What a grain lets in ahead of its
// mailbox by design is left out: a hop that may be a call back on a
// waiting turn's chain (letInOnChain), of any kind; and at a grain with a
// WithMayInterleave predicate, what it takes and what it does not keep
// their order each among themselves. A reentrant grain lets every other
// hop in, in order: a turn's ask past its bound too (letInAhead in
// silo/dispatch.go). Hops that became dead letters drop out — a Stop's
// line, an overflow and a failed activation take them in order too. The
// caller holds l.mu.
func (l *ledger) order(v *verdict) {
	type stream struct {
		to    string
		taken bool
	}
	streams := make(map[stream][]uint64)
	for id, h := range l.sent {
		if !h.ordered || h.started == 0 || h.end == 0 || l.handled[id] != 1 || l.dead[id] != 0 {
			continue
		}
		if l.letInOnChain(h) {
			continue
		}
		streams[stream{h.to, h.taken}] = append(streams[stream{h.to, h.taken}], id)
		v.inOrder++
	}
	for _, ids := range streams {
		// From the last turn begun back: a hop whose send began after
		// that of one begun later than it had ended was overtaken.
		slices.SortFunc(ids, func(a, b uint64) int { return cmp.Compare(l.sent[b].started, l.sent[a].started) })
		var later uint64 // of the hops begun later, the one whose send ended first
		for _, id := range ids {
			h := l.sent[id]
			if later != 0 && l.sent[later].end < h.begin {
				v.nDisordered++
				if len(v.disordered) < 5 {
					v.disordered = append(v.disordered, fmt.Sprintf("hop %d (%s) began before hop %d (%s), whose send had returned before its own began", id, h.describe(), later, l.sent[later].describe()))
				}
			}
			if later == 0 || h.end < l.sent[later].end {
				later = id
			}
		}
	}
}

// describe names h's sender, target and kind of send for a report: a tell,
// or an ask and how it ended.
func (h sentHop) describe() string {
	if h.tell {
		return h.key + ", a tell"
	}
	return h.key + ", an ask: " + h.outcome
}

// letInOnChain says whether h may be a call back on the chain of a turn
// of its target that waits, which the target lets in ahead of its
// mailbox (call-chain reentrancy; a grain on its way out lets such calls
// in; an OnActivate lets in those of its own chain its kind takes): its
// target is on its chain — the grains whose turns sent it and its
// parents, up to a client's send, or to a tick's or an OnDeactivate's
// turn, whose chain begins with its grain (a turn with no ask to handle)
// — or its chain is not known: it came from an OnActivate, whose chain is
// its first caller's. The caller holds l.mu.
func (l *ledger) letInOnChain(h sentHop) bool {
	for p := h.parent; p != 0; {
		ph, ok := l.sent[p]
		if !ok {
			root := l.roots[p]
			if g, ok := strings.CutPrefix(root, "tick:"); ok {
				return g == h.to
			}
			if g, ok := strings.CutPrefix(root, "deactivate:"); ok {
				return g == h.to
			}
			return true // an OnActivate's: its first caller's chain
		}
		if ph.to == h.to {
			return true
		}
		p = ph.parent
	}
	return false
}

// ok says whether the run kept every promise: nothing lost, doubled or
// out of order, no ask left to its deadline, no Stop or Deactivate
// refused, no hook seeing a promise broken.
func (v verdict) ok() bool {
	return v.nLost == 0 && v.nDoubled == 0 && v.nDisordered == 0 && v.timeouts == 0 && v.badControls == 0 && v.nBadHooks == 0
}

func (v verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hops %d (tells %d), turns %d, lost %d, doubled %d, out of order %d (of %d checked), asks timed out %d (slowest of the rest %v); asks ended:",
		v.hops, v.tells, v.handled, v.nLost, v.nDoubled, v.nDisordered, v.inOrder, v.timeouts, v.slowest.Round(time.Millisecond))
	writeCounts(&b, v.outcomes)
	if len(v.deadBy) > 0 {
		b.WriteString("; dead letters:")
		writeCounts(&b, v.deadBy)
	}
	if v.observed > 0 {
		fmt.Fprintf(&b, "; read by observers %d", v.observed)
	}
	if v.hung > 0 {
		fmt.Fprintf(&b, "; hooks hung past their bound %d", v.hung)
	}
	if len(v.controls) > 0 {
		b.WriteString("; from outside:")
		writeCounts(&b, v.controls)
	}
	for _, s := range v.lost {
		fmt.Fprintf(&b, "\n  lost: %s", s)
	}
	for _, s := range v.doubled {
		fmt.Fprintf(&b, "\n  doubled: %s", s)
	}
	for _, s := range v.disordered {
		fmt.Fprintf(&b, "\n  out of order: %s", s)
	}
	if v.nBadHooks > 0 {
		fmt.Fprintf(&b, "\n  %d broken promises hooks saw", v.nBadHooks)
	}
	for _, s := range v.badHooks {
		fmt.Fprintf(&b, "\n  hook: %s", s)
	}
	return b.String()
}

// writeCounts writes m's counts, " key n" each, its keys in order.
func writeCounts(b *strings.Builder, m map[string]int) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(b, " %s %d", k, m[k])
	}
}
