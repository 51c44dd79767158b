package directory

import (
	"fmt"
	"unsafe"

	"github.com/granary-go/granary/grain"
)

// Table is one partition's activation table: at most one *T per identity.
//
// It is an open-addressing hash table with linear probing, keyed by the
// identity's 64-bit hash, which the sender computed once for the partition
// and which the table reuses instead of hashing again (a Go map would hash
// the uint64 a second time). A slot is 16 bytes, the hash and the entry; a
// lookup compares the hash first and the identity only on a hash match, so
// two identities whose hashes collide still get separate entries. Deletion
// shifts later entries of the probe run back (no tombstones), and the table
// shrinks when mostly empty, so a burst of activations does not pin memory.
// It resizes incrementally, moving its entries into the new array a few
// probe runs per Put and Delete, so no call rehashes them all.
//
// The zero Table is not usable; call NewTable. It is not safe for
// concurrent use.
type Table[T any] struct {
	slots   []slot[T] // a power of two long; nil v marks an empty slot
	n       int       // entries, in slots and old
	shift   uint      // 64 - log2(len(slots))
	mult    uint64    // the multiplier of home, another at each shrink
	shrinks int       // shrinks so far, which picks mult
	iter    int       // All calls in progress: no shrinking or moving under them
	idOf    func(*T) *grain.ID

	// A table resizes incrementally: the entries of the array it outgrew
	// (or shrank from) stay in old until moved, a few probe runs at each
	// Put and Delete, so no single call rehashes them all (in one step, the last doubling of a
	// partition of 500,000 grains held its owner for 7-43 ms; now at most the
	// doubled array's allocation, 1-4 ms at that size). Whole runs
	// move at once, from an empty slot on, so the runs left in old stay
	// whole and are found as before. The slots passed keep their copies
	// (clearing them would cost a write barrier each while the GC runs):
	// a lookup whose home was passed knows its run moved.
	old      []slot[T] // nil when no resize is under way
	oldShift uint
	oldMult  uint64
	start    int // the empty slot of old the moving began at
	passed   int // slots of old passed since: from start, cyclically

	deletes uint64 // Deletes that removed an entry
}

type slot[T any] struct {
	h uint64
	v *T
}

const (
	minSlots = 16
	// pageSlots is how many slots a page holds, at 4 KB pages (alloc).
	pageSlots = 4096 / int(unsafe.Sizeof(slot[struct{}]{}))
	// A table grows past 3/4 full and shrinks below 1/8 full: lookups that
	// miss (an activation) probe a few slots on average, and a resize pays
	// for itself many times over before the next.
	growNum, growDen = 3, 4
	shrinkDen        = 8
)

// NewTable returns an empty table. idOf returns a pointer to the identity
// an entry is for, which must not change while the entry is in the table; a
// nil idOf is refused with grain.ErrInvalidConfig.
func NewTable[T any](idOf func(*T) *grain.ID) (*Table[T], error) {
	if idOf == nil {
		return nil, fmt.Errorf("%w: a directory table with a nil idOf", grain.ErrInvalidConfig)
	}
	t := &Table[T]{idOf: idOf, mult: multiplier(0), shrinks: 1}
	t.alloc(minSlots)
	return t, nil
}

// home is the first slot h probes. The hash is multiplied and the top bits
// of the product taken, not the hash's own: those place every identity of a
// partition in one N-th of the range of hashes — they chose the partition
// (queues.Partitioner) — and the product's depend on all of the hash's.
//
// The multiplier changes when the table shrinks. Entries removed in slot
// order — a shutdown deactivates a partition's grains in the order All
// visits them — leave behind those whose homes were the highest; rehashed
// into half the slots with the same multiplier, their homes would all fall
// in the top sixteenth of the new table and run together in one cluster,
// which every later removal then scans: a million grains took 5.7 s to
// shut down. A new multiplier spreads them again. Growing keeps it: all
// the entries are there, as spread as they were, and rehashing them with
// the same multiplier walks the new slots in order (a new one made every
// insert a cache miss: `activate` 14 % slower).
func (t *Table[T]) home(h uint64) uint64 { return (h * t.mult) >> t.shift }

// oldHome is home in old.
func (t *Table[T]) oldHome(h uint64) uint64 { return (h * t.oldMult) >> t.oldShift }

// multiplier returns the multiplier after the table's i-th shrink (0:
// before any, the golden ratio's constant): an odd number drawn from
// splitmix64's sequence, a different one each time. A multiplier used
// before could meet the keys whose order it set again (the remaining ones
// of a removal in slot order): cycling five constants did, on the fifth
// shrink.
func multiplier(i int) uint64 {
	if i == 0 {
		return 0x9e3779b97f4a7c15
	}
	z := uint64(i+1) * 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return (z ^ z>>31) | 1
}

// find returns the slot of id (hash h), or -1. It keeps a loop of its own
// (findOld has the same): Get is on every message's path, and one generic loop
// for both (idOf through the dictionary) cost it 3 ns.
func (t *Table[T]) find(id grain.ID, h uint64) int {
	mask := uint64(len(t.slots) - 1)
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.v == nil {
			return -1
		}
		if s.h == h && *t.idOf(s.v) == id {
			return int(i)
		}
	}
}

// findOld returns the slot of id (hash h) in old, or -1.
func (t *Table[T]) findOld(id grain.ID, h uint64) int {
	i := t.oldHome(h)
	if t.wasPassed(i) {
		return -1 // its run, if it had one, has moved
	}
	mask := uint64(len(t.old) - 1)
	for ; ; i = (i + 1) & mask {
		s := &t.old[i]
		if s.v == nil {
			return -1
		}
		if s.h == h && *t.idOf(s.v) == id {
			return int(i)
		}
	}
}

// HomeAddr returns the address of the slot where a lookup of hash h begins,
// for a caller that prefetches it.
func (t *Table[T]) HomeAddr(h uint64) uintptr {
	return uintptr(unsafe.Pointer(&t.slots[t.home(h)]))
}

// Guess returns the first entry of h's probe run whose hash is h, without
// comparing identities: an entry to prefetch, not an answer (Get is).
func (t *Table[T]) Guess(h uint64) *T {
	mask := uint64(len(t.slots) - 1)
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.v == nil || s.h == h {
			return s.v
		}
	}
}

// Deletes counts the entries removed so far. An entry that Guess or Get
// returned is still the table's for its identity while Deletes has not
// moved: entries are removed only by Delete, and Put never replaces one.
// A caller that keeps what Guess returned for a while checks its identity
// as ever, and Deletes to know the entry was not removed meanwhile.
func (t *Table[T]) Deletes() uint64 { return t.deletes }

// Get returns the entry for id, whose hash is h.
func (t *Table[T]) Get(id grain.ID, h uint64) (*T, bool) {
	if i := t.find(id, h); i >= 0 {
		return t.slots[i].v, true
	}
	if t.old != nil {
		if i := t.findOld(id, h); i >= 0 {
			return t.old[i].v, true
		}
	}
	return nil, false
}

// Put inserts v for id (hash h). It reports false, and changes nothing, if
// id already has an entry (the single-activation rule is enforced here, not
// trusted) or v is nil.
func (t *Table[T]) Put(id grain.ID, h uint64, v *T) bool {
	if v == nil {
		return false
	}
	if _, had := t.Get(id, h); had {
		return false
	}
	if (t.n+1)*growDen > len(t.slots)*growNum {
		t.rehash(2*len(t.slots), false)
	}
	t.insert(h, v)
	t.n++
	t.move(moveSteps)
	return true
}

// moveSteps is how many slots of old each Put and Delete passes: far more
// than needed to be done before the new array fills (a growth leaves it
// 3/8 full, and it grows again at 3/4: half the old length of Puts later),
// in chunks long enough to stream through memory, short enough (4 KB of
// old) that no call stalls.
const moveSteps = 256

// wasPassed reports whether slot i of old has been passed: its run moved.
func (t *Table[T]) wasPassed(i uint64) bool {
	return int((i-uint64(t.start))&uint64(len(t.old)-1)) < t.passed
}

// rehash makes a new array of n slots — double to grow, half to shrink,
// with a new multiplier if newMult — and leaves the entries in old, to be
// moved a few runs at a time (move). A rehash still under way is finished
// first.
func (t *Table[T]) rehash(n int, newMult bool) {
	t.move(len(t.old)) // all that is left, if anything
	old := t.slots
	start := 0
	for old[start].v != nil { // a table never fills: there is an empty slot
		start++
	}
	t.old, t.oldShift, t.oldMult, t.start, t.passed = old, t.shift, t.mult, start, 0
	if newMult {
		t.mult = multiplier(t.shrinks)
		t.shrinks++
	}
	t.alloc(n)
}

// move passes at least steps slots of old — those empty, and whole probe
// runs of entries, each moved to slots — unless an All is under way: the
// entries must not move under it.
func (t *Table[T]) move(steps int) {
	if t.old == nil || t.iter > 0 {
		return
	}
	mask := len(t.old) - 1
	for ; steps > 0 && t.passed < len(t.old); steps-- {
		i := (t.start + t.passed) & mask
		if t.old[i].v == nil {
			t.passed++
			continue
		}
		for t.old[i].v != nil { // a whole run, from just after an empty slot
			t.insert(t.old[i].h, t.old[i].v)
			i = (i + 1) & mask
			t.passed++
		}
	}
	if t.passed >= len(t.old) {
		t.old = nil // the last run ended at start: every slot passed
	}
}

func (t *Table[T]) insert(h uint64, v *T) {
	mask := uint64(len(t.slots) - 1)
	i := t.home(h)
	for t.slots[i].v != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = slot[T]{h: h, v: v}
}

// Delete removes the entry for id (hash h), if there is one.
func (t *Table[T]) Delete(id grain.ID, h uint64) {
	if i := t.find(id, h); i >= 0 {
		removeAt(t.slots, uint64(i), t.home)
	} else if t.old == nil {
		return
	} else if i := t.findOld(id, h); i >= 0 {
		// Within its run, which has not moved: the run stays whole.
		removeAt(t.old, uint64(i), t.oldHome)
	} else {
		return
	}
	t.n--
	t.deletes++
	t.move(moveSteps)
	if t.iter == 0 && len(t.slots) > minSlots && t.n*shrinkDen < len(t.slots) {
		t.rehash(len(t.slots)/2, true)
	}
}

// removeAt empties slot i and moves back the entries after it in its probe
// run that would otherwise no longer be found from their home slot.
func removeAt[T any](slots []slot[T], i uint64, home func(uint64) uint64) {
	mask := uint64(len(slots) - 1)
	for j := (i + 1) & mask; slots[j].v != nil; j = (j + 1) & mask {
		k := home(slots[j].h)
		// The entry at j stays if its home lies cyclically in (i, j].
		if (i < j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		slots[i] = slots[j]
		i = j
	}
	slots[i] = slot[T]{}
}

// alloc makes slots an empty array of n slots.
func (t *Table[T]) alloc(n int) {
	t.slots = make([]slot[T], n)
	// Each page written before anything reads it: read first (a probe,
	// or the GC's write barrier reading the pointer a store replaces), a
	// page fresh from the OS is mapped to the zero page and faulted again
	// on the write, a copy that flushes the TLB on every CPU. The hash,
	// not the entry: its store has no barrier. (`activate` 1.34x:
	// docs/performance-log.md, item 53.)
	for i := 0; i < n; i += pageSlots {
		t.slots[i].h = 0
	}
	t.shift = 64
	for m := n; m > 1; m >>= 1 {
		t.shift--
	}
}

// Len returns the number of entries.
func (t *Table[T]) Len() int { return t.n }

// All calls f for each entry until f returns false. f may delete the entry
// it is given, nothing else.
func (t *Table[T]) All(f func(grain.ID, *T) bool) {
	t.iter++
	defer func() { t.iter-- }()
	start := 0
	for t.slots[start].v != nil { // a table never fills: there is an empty slot
		start++
	}
	if !visit(t.slots, start, len(t.slots), t.idOf, f) || t.old == nil {
		return
	}
	// The entries not moved yet (none moves meanwhile), from the first slot
	// not passed, which follows an empty one.
	visit(t.old, t.start+t.passed, len(t.old)-t.passed, t.idOf, f)
}

// AppendValues appends every entry to dst, in no particular order, and
// returns it. It reads the slots, not the entries: a listing of many
// entries costs a pass over the array, not a cache miss per entry for its
// identity (All's), so a caller that reads the entries later, elsewhere,
// holds the table's owner for no longer than the pass.
func (t *Table[T]) AppendValues(dst []*T) []*T {
	for _, s := range t.slots {
		if s.v != nil {
			dst = append(dst, s.v)
		}
	}
	if t.old != nil { // the entries not moved yet: the slots not passed
		mask := len(t.old) - 1
		for k := t.passed; k < len(t.old); k++ {
			if v := t.old[(t.start+k)&mask].v; v != nil {
				dst = append(dst, v)
			}
		}
	}
	return dst
}

// visit calls f for each entry in the count slots from slot from on,
// cyclically, until f returns false, and reports whether it went through
// them all. Slot from must be empty or follow an empty slot: entries only
// ever move back within their probe run, which then never wraps past it,
// so a deletion by f can move an entry into the slot being visited, never
// past it.
func visit[T any](slots []slot[T], from, count int, idOf func(*T) *grain.ID, f func(grain.ID, *T) bool) bool {
	mask := len(slots) - 1
	for k := range count {
		i := (from + k) & mask
		for {
			v := slots[i].v
			if v == nil {
				break
			}
			if !f(*idOf(v), v) {
				return false
			}
			if slots[i].v == v {
				break // not deleted: on to the next slot
			}
			// deleted, and maybe replaced by a later entry: visit slot i again
		}
	}
	return true
}
