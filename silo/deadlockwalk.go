package silo

import (
	"slices"
	"unsafe"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// walk is one deadlock walk (closesCycle): is env's caller's turn stuck,
// waiting on env behind env's busy target, on a cycle back to it?
//
// The walk reads the part of the wait-for graph that env's target leads
// to into nodes of two sorts: places — a grain (a stateless worker's
// activation) that an ask waits behind — and turns. A place is stuck if
// one of its turns is: it lets nothing in while it waits, so what waits
// for it waits for all its turns — but at a WithMayInterleave grain, for
// the one turn that holds it (holding.go), unless it is being stopped. A turn is stuck if every call it made
// is: a fan-out may wait for its first reply only. A call is stuck if
// what it waits on is: the place it is queued behind; or, let in beside
// a waiting turn (a reentrant grain's, a call back on its chain, one a
// WithMayInterleave predicate takes), its own turn there, which is
// answered once that turn's calls are. Anything the walk cannot be sure
// of is free: a call answered or given up on, an activation not known, a
// grain whose entry two grains of one hash share, a place past maxCycle
// grains looked at, a place's turns past its first maxPlaceTurns.
//
// What is stuck is what is not free once freedom has spread as far as
// it can (settle): a place whose turns are all free is free, a turn with
// one free call is free, and so on until nothing changes — each node is
// read once and settled in a few passes over a few dozen nodes, however
// the grains fan out to each other (a walk along paths, one path a
// route through the tangle, took more than maxCycle steps for four
// grains that each called every other). env closes a cycle if its turn
// is stuck and a path of stuck nodes leads from its target back to it;
// a target stuck only in a loop of its own is none of env's doing.
//
// A node is found again by a scan in a small walk and by an index in a
// large one (find), and a grain's calls are read in one pass (readPlace):
// a walk's cost grows with its nodes, not their square, which is what
// lets its bound be maxCycle grains.
//
// A walk is made by one goroutine: an owner keeps one between its walks
// (partition.walk), whose buffers keep their room, so that a walk
// allocates nothing once they have grown.
type walk struct {
	s   *Silo
	env *queues.Envelope
	// nodes: places and turns, the root (env's target) first
	nodes []wnode
	// calls: every turn's calls, a range each (wnode.from, to); dest, for
	// each, the node it waits on (or freeCall), once the turn is followed
	calls []waitCall
	dest  []int32
	// members: every place's turns, a range each
	members []int32
	read    []waitCall // what a shard read returned
	// index finds a node by what it is (nodeKey), once the walk is past
	// scanNodes: looked up for every call followed, a scan of the nodes
	// made a walk of a few hundred nodes cost their square. A table of
	// node+1 (0: empty) from nodeKey.slot on.
	index []int32
	// slot and order: readPlace's, each call read's turn among the place's
	// first maxPlaceTurns (or -1), and the calls read in order of it
	slot  []int8
	order []waitCall
	marks []int32 // pathBack's and stillStuck's, a mark a node
	queue []int32
	reads int   // grains looked at, bounded by maxCycle
	own   int32 // env's turn's node, or -1 until found
	// moved: the second look found an ask of the verdict answered or
	// given up on since the walk read it (stillStuck)
	moved bool
	// none is the env of a walk for no ask (stuckBehind)
	none queues.Envelope
	// betweenLooks, nil but in tests, runs before the second look: what
	// another owner does meanwhile, on demand.
	betweenLooks func()
}

// wnode is a place or a turn of a walk.
type wnode struct {
	at    step
	shard *waitShard
	turn  *turnInfo // a turn's
	place bool
	// read: a place's calls are known (a place past maxCycle is not, and
	// is free); followed: a turn's calls' destinations are
	read, followed bool
	free           bool
	from, to       int32 // a place's turns in members; a turn's calls in calls
}

// nodeKey is what a node is: the key of its grain's wait, and its turn
// (nil for a place). A turn with no turnInfo (a tell's, a tick's) is no
// key: it is found from its place only, once. Two grains whose waits
// share a key (a hash two identities share) are two nodes, told apart by
// their grains.
type nodeKey struct {
	key   uint64
	turn  *turnInfo
	place bool
}

// slot returns where the index's probe for k begins. (The turn's
// address names it while the walk holds it: the heap does not move.)
func (k nodeKey) slot() int {
	h := k.key ^ uint64(uintptr(unsafe.Pointer(k.turn)))*0x9e3779b97f4a7c15
	if k.place {
		h = ^h
	}
	return int((h ^ h>>32) & (indexSize - 1))
}

// is reports whether n is the node k says, of the grain at.
func (k nodeKey) is(n *wnode, at step) bool {
	return n.at.key == k.key && n.place == k.place && n.turn == k.turn && n.at.id == at.id // the hash first: IDs compare strings
}

// indexSize is the size of a walk's index: a power of two, four slots a
// node, so that probes are short.
const indexSize = 4 * maxNodes

// freeCall is the destination of a call that may be answered.
const freeCall = -1

// run walks from root, env's target, whose wait is in shard, and returns
// the cycle env closes — the grains in call order, from env's caller back
// to it — or nil.
func (w *walk) run(s *Silo, env *queues.Envelope, root step, shard *waitShard) []grain.ID {
	w.s, w.env, w.reads, w.own, w.moved = s, env, 0, -1, false
	w.nodes, w.calls, w.dest, w.members = w.nodes[:0], w.calls[:0], w.dest[:0], w.members[:0]
	defer w.drop()
	w.placeNode(root, shard)
	w.explore()
	if w.own < 0 {
		return nil // the walk never came back to env's turn
	}
	w.settle()
	if w.nodes[w.own].free {
		return nil // env's turn may go on at another call's reply
	}
	path := w.pathBack()
	if path == nil {
		return nil
	}
	if w.betweenLooks != nil {
		w.betweenLooks()
	}
	if !w.stillStuck() {
		w.moved = true // what it rests on moved meanwhile: closesCycle walks again
		return nil
	}
	return path
}

// explore reads the graph from the root, breadth first: the nodes each
// read adds are read in turn, until none is left; past maxCycle, whatever
// is left unread is free.
func (w *walk) explore() {
	for i := 0; i < len(w.nodes); i++ {
		if w.nodes[i].place {
			w.readPlace(int32(i))
		} else {
			w.follow(int32(i))
		}
	}
}

// stuckBehind appends to buf, and returns, the asks queued behind root —
// a busy grain or stateless activation, whose wait is in shard — made by
// turns stuck on root: each closes a cycle through root's stuck turn
// (partition.rewalkBehind, which takes each one's verdict as its own ask,
// breakDeadlock). One walk from root finds them among every ask behind
// it, however many wait there: walked one ask at a time, up to maxCycle
// of them, a grain with a long backlog (asks from outside, from turns no
// one waits for) kept the ask that closed the cycle past the bound, and
// it waited for its deadline (the chaos program, -keys 2 -fan 8 -depth 5).
func (w *walk) stuckBehind(s *Silo, root step, shard *waitShard, buf []*queues.Request) []*queues.Request {
	w.none = queues.Envelope{Target: root.id} // no ask of its own: no call is env's
	w.s, w.env, w.reads, w.own, w.moved = s, &w.none, 0, -1, false
	w.nodes, w.calls, w.dest, w.members = w.nodes[:0], w.calls[:0], w.dest[:0], w.members[:0]
	defer w.drop()
	w.placeNode(root, shard)
	w.explore()
	w.settle()
	if w.nodes[0].free {
		return buf
	}
	for i := range w.nodes {
		n := &w.nodes[i]
		if n.place || n.free {
			continue
		}
		for k := n.from; k < n.to; k++ {
			if w.dest[k] == 0 {
				buf = append(buf, w.calls[k].req)
			}
		}
	}
	return buf
}

// drop lets go of what the walk read: a partition's buffers would keep
// the requests and turns alive until its next walk. Buffers a rare walk
// grew large (a grain with hundreds of calls out) are let go of whole.
func (w *walk) drop() {
	clear(w.nodes)
	clear(w.calls)
	clear(w.read[:cap(w.read)])
	if len(w.nodes) > scanNodes {
		clear(w.index)
	}
	w.s, w.env, w.none = nil, nil, queues.Envelope{}
	if cap(w.calls) > keptCalls || cap(w.read) > keptCalls || cap(w.order) > keptCalls {
		*w = walk{betweenLooks: w.betweenLooks}
	}
}

// keptCalls is the most calls an owner's walk keeps room for between
// walks (80 bytes each): a grain that fans out to a thousand others, an
// ask behind it from a turn walked each time, should not make a walk
// allocate its buffers again each time.
const keptCalls = 1024

// placeNode returns the node of the place at, whose wait is in shard,
// adding it unread if the walk has none.
func (w *walk) placeNode(at step, shard *waitShard) int32 {
	if i, ok := w.find(at, nodeKey{key: at.key, place: true}); ok {
		return i
	}
	if len(w.nodes) >= maxNodes {
		return freeCall // past the bound: free
	}
	w.add(wnode{at: at, shard: shard, place: true})
	return int32(len(w.nodes) - 1)
}

// find returns the node of at that k says, if the walk has it: by a scan
// while the walk is small, by its index once it is not.
func (w *walk) find(at step, k nodeKey) (int32, bool) {
	if len(w.nodes) > scanNodes {
		for j := k.slot(); w.index[j] != 0; j = (j + 1) & (indexSize - 1) {
			if i := w.index[j] - 1; k.is(&w.nodes[i], at) {
				return i, true
			}
		}
		return 0, false
	}
	for i := range w.nodes {
		if k.is(&w.nodes[i], at) {
			return int32(i), true
		}
	}
	return 0, false
}

// add appends n to the walk's nodes, and to its index once the walk is
// past scanNodes.
func (w *walk) add(n wnode) {
	w.nodes = append(w.nodes, n)
	switch {
	case len(w.nodes) < scanNodes+1:
	case len(w.nodes) == scanNodes+1:
		if w.index == nil {
			w.index = make([]int32, indexSize)
		}
		for i := range w.nodes {
			w.indexNode(int32(i))
		}
	default:
		w.indexNode(int32(len(w.nodes) - 1))
	}
}

// indexNode puts node i in the index, unless it is a turn with no
// turnInfo (found from its place only).
func (w *walk) indexNode(i int32) {
	n := &w.nodes[i]
	if !n.place && n.turn == nil {
		return
	}
	j := nodeKey{key: n.at.key, turn: n.turn, place: n.place}.slot()
	for w.index[j] != 0 {
		j = (j + 1) & (indexSize - 1)
	}
	w.index[j] = i + 1
}

// scanNodes is the most nodes a walk finds one among by a scan: most
// walks are this small, and an index filled and cleared each walk would
// cost them more than it saves.
const scanNodes = 32

// turnSlot returns where readPlace's probe for turn begins.
func turnSlot(turn *turnInfo) int {
	return int(uint64(uintptr(unsafe.Pointer(turn))) * 0x9e3779b97f4a7c15 >> 40 % (2 * maxPlaceTurns))
}

// maxPlaceTurns bounds the turns of one place a walk reads. A place is
// stuck if one of its turns is, so a turn left unread only makes the
// place look free, never stuck; read whole, a grain with hundreds of
// turns waiting at once (a WithMayInterleave grain's) filled the walk
// with its turns, and none of what they wait on was read: a cycle
// through its first turn was taken for free (BenchmarkDeadlockWalk's
// turns1000, TestACycleThroughOneOfManyWaitingTurnsFailsFast).
const maxPlaceTurns = maxCycle / 4

// A turn's place among its grain's is an int8 (walk.slot): this does not
// compile if maxPlaceTurns outgrows it.
const _ uint8 = 128 - maxPlaceTurns

// maxNodes bounds the places and turns a walk holds: a turn that fans out
// to thousands of grains is free once past it, as a grain past maxCycle
// is, and costs a walk a few hundred nodes, not one a call.
const maxNodes = 2 * maxCycle

// turnNode returns the node of turn, of the grain at at, whose calls are
// those of calls that turn made, adding it if the walk has none (or
// freeCall, past maxNodes). A turn is found from its place, and from an
// ask let in that it handles: one node for both.
func (w *walk) turnNode(at step, shard *waitShard, turn *turnInfo, calls []waitCall) int32 {
	if turn != nil {
		if i, ok := w.find(at, nodeKey{key: at.key, turn: turn}); ok {
			return i
		}
	}
	if len(w.nodes) >= maxNodes {
		return freeCall
	}
	from := int32(len(w.calls))
	for _, c := range calls {
		if c.turn != turn {
			continue
		}
		if c.req == w.env.Request {
			w.own = int32(len(w.nodes))
		}
		w.calls = append(w.calls, c)
		w.dest = append(w.dest, freeCall)
	}
	w.add(wnode{at: at, shard: shard, turn: turn, from: from, to: int32(len(w.calls))})
	return int32(len(w.nodes) - 1)
}

// readPlace reads the calls out of place i, a node for each of its
// turns: the first maxPlaceTurns of them, whose calls it gathers in one
// pass over what it read (a grain with a thousand calls out costs the
// walk a pass, not a pass a turn).
func (w *walk) readPlace(i int32) {
	if w.reads++; w.reads > maxCycle {
		return // unread: free
	}
	at, shard := w.nodes[i].at, w.nodes[i].shard
	w.read = shard.placeCalls(at.id, at.key, w.s.holdsWhileWaiting(at.id), w.s.oneHolds(at.id), w.read[:0])
	// Each call's turn among the place's first maxPlaceTurns (-1 past
	// them), and then the calls in order of it, counted into place.
	var turns [maxPlaceTurns]*turnInfo
	var seen [2 * maxPlaceTurns]int16 // k+1 of turns[k], by its address (turnSlot), probed on
	var ends [maxPlaceTurns + 1]int32 // turn k's calls, gathered: order[ends[k]:ends[k+1]]
	nt := 0
	w.slot = slices.Grow(w.slot[:0], len(w.read))[:len(w.read)]
	for j := range w.read {
		t, k := w.read[j].turn, -1
		if j > 0 && t == w.read[j-1].turn {
			k = int(w.slot[j-1]) // a fan-out's calls are mostly side by side
		} else {
			for h := turnSlot(t); ; h = (h + 1) % len(seen) {
				if seen[h] == 0 {
					if nt < maxPlaceTurns {
						turns[nt], seen[h], k = t, int16(nt+1), nt
						nt++
					}
					break
				}
				if turns[seen[h]-1] == t {
					k = int(seen[h] - 1)
					break
				}
			}
		}
		w.slot[j] = int8(k) // -1: a turn none the place may be stuck in: see maxPlaceTurns
		if k >= 0 {
			ends[k+1]++
		}
	}
	if nt > 1 { // else one turn's, all of them (a fan-out): no gathering
		for k := range nt {
			ends[k+1] += ends[k]
		}
		w.order = slices.Grow(w.order[:0], int(ends[nt]))[:ends[nt]]
		next := ends
		for j, k := range w.slot {
			if k >= 0 {
				w.order[next[k]] = w.read[j]
				next[k]++
			}
		}
	}
	from := int32(len(w.members))
	for k := range nt {
		calls := w.read
		if nt > 1 {
			calls = w.order[ends[k]:ends[k+1]]
		}
		if t := w.turnNode(at, shard, turns[k], calls); t != freeCall {
			w.members = append(w.members, t) // else past the bound: a turn not known is none the place may be stuck in
		}
	}
	clear(w.order) // the walk keeps its own copies, in calls
	n := &w.nodes[i]
	n.read, n.from, n.to = true, from, int32(len(w.members))
}

// follow finds what each call of turn i waits on, up to the first that
// may be answered: the turn is free then, whatever the others wait on
// (their destinations stay freeCall), and a wide fan-out with a call
// answered costs no more.
func (w *walk) follow(i int32) {
	for k := w.nodes[i].from; k < w.nodes[i].to; k++ {
		d := w.destOf(w.calls[k]) // which may add to w.dest: not in one statement
		w.dest[k] = d
		if d == freeCall {
			break
		}
	}
	w.nodes[i].followed = true
}

// destOf returns the node c, a call of a turn of the walk's, waits on:
// the place it is queued behind; its own turn, let in beside the
// target's waiting turn; or freeCall.
func (w *walk) destOf(c waitCall) int32 {
	if c.req == w.env.Request {
		return 0 // env waits behind its target: the root
	}
	s, req, next := w.s, c.req, c.target
	if req.Resolved() || req.Abandoned() {
		return freeCall // the call is over, or given up on
	}
	part, key, ok := s.waitsAt(next, c.thash, req)
	if !ok {
		return freeCall // not known which of next's activations req waits behind
	}
	shard := &s.parts[part].waits
	at := step{id: next, key: key}
	if req.Interleave && !req.InLine() && !shard.leaving(next, key) ||
		(c.letIn || !s.holdsWhileWaiting(next)) && !shard.hookWaits(next, key) {
		// next lets req in while it waits: a call back on a waiting turn's
		// chain — unless it was put in line behind next's turns, the turn
		// on its chain gone, or next is on its way out — or one its kind
		// lets in (an activating grain lets nothing in). It is answered
		// once its own turn ends: at once, if that has not begun or waits
		// on nothing; else once that turn's calls are.
		if w.reads++; w.reads > maxCycle {
			return freeCall
		}
		w.read = shard.turnCalls(next, key, req, w.read[:0])
		if len(w.read) == 0 {
			return freeCall
		}
		return w.turnNode(at, shard, w.read[0].turn, w.read)
	}
	return w.placeNode(at, shard)
}

// settle marks free every node that is: a place not read, or whose turns
// all are; a turn not followed, or with a call that may be answered.
// Freedom only spreads, so passes until one changes nothing reach the
// least set of free nodes — the rest are stuck, each on stuck nodes.
func (w *walk) settle() {
	for changed := true; changed; {
		changed = false
		for i := len(w.nodes) - 1; i >= 0; i-- {
			if n := &w.nodes[i]; !n.free && w.freeNow(n) {
				n.free, changed = true, true
			}
		}
	}
}

// freeNow reports whether n is free, given what is free so far.
func (w *walk) freeNow(n *wnode) bool {
	if n.place {
		if !n.read {
			return true
		}
		for _, t := range w.members[n.from:n.to] {
			if !w.nodes[t].free {
				return false
			}
		}
		return true
	}
	if !n.followed {
		return true
	}
	for _, d := range w.dest[n.from:n.to] {
		if d == freeCall || w.nodes[d].free {
			return true
		}
	}
	return n.from == n.to
}

// pathBack returns the cycle, from env's caller through its target along
// stuck nodes back to env's turn, or nil if no such path is: the grains
// each call of the path waits on, in order.
func (w *walk) pathBack() []grain.ID {
	prev := w.mark(-2) // -2: not reached
	prev[0] = -1
	queue := append(w.queue[:0], 0)
	for h := 0; h < len(queue) && prev[w.own] == -2; h++ {
		i := queue[h]
		n := &w.nodes[i]
		next := w.dest[n.from:n.to]
		if n.place {
			next = w.members[n.from:n.to]
		}
		for _, j := range next {
			if j != freeCall && !w.nodes[j].free && prev[j] == -2 {
				prev[j] = i
				queue = append(queue, j)
			}
		}
	}
	w.queue = queue // its room, for the next walk
	if prev[w.own] == -2 {
		return nil // env's target is stuck on a loop of its own: none of env's doing
	}
	back := w.queue[:0] // the path's calls' targets, last first
	for j := w.own; j != 0; j = prev[j] {
		if !w.nodes[prev[j]].place { // a turn's call: into another grain
			back = append(back, j)
		}
	}
	cycle := append(make([]grain.ID, 0, len(back)+2), w.env.Sender(), w.env.Target)
	for i := len(back) - 1; i >= 0; i-- {
		cycle = append(cycle, w.nodes[back[i]].at.id)
	}
	w.queue = back
	return cycle
}

// stillStuck is the second look (closesCycle): env's turn is stuck on
// the calls of the stuck turns it waits on, every one of theirs, and of
// one stuck turn of each place they wait behind; if every one of those
// is still pending, every one was when the walk read it, and none can
// be answered.
func (w *walk) stillStuck() bool {
	seen := w.mark(0)
	todo := append(w.queue[:0], w.own)
	defer func() { w.queue = todo[:0] }() // its room, for the next walk
	seen[w.own] = 1
	for len(todo) > 0 {
		n := &w.nodes[todo[len(todo)-1]]
		todo = todo[:len(todo)-1]
		if n.place {
			i := slices.IndexFunc(w.members[n.from:n.to], func(t int32) bool { return !w.nodes[t].free })
			if t := w.members[int(n.from)+i]; seen[t] == 0 {
				seen[t] = 1
				todo = append(todo, t)
			}
			continue
		}
		for k := n.from; k < n.to; k++ {
			if r := w.calls[k].req; r.Resolved() || r.Abandoned() {
				return false
			}
			if d := w.dest[k]; seen[d] == 0 {
				seen[d] = 1
				todo = append(todo, d)
			}
		}
	}
	return true
}

// mark returns w.marks, a mark for each node, each set to v.
func (w *walk) mark(v int32) []int32 {
	w.marks = slices.Grow(w.marks[:0], len(w.nodes))[:len(w.nodes)]
	for i := range w.marks {
		w.marks[i] = v
	}
	return w.marks
}
