package directory

import (
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
//
// The zero Table is not usable; call NewTable. It is not safe for
// concurrent use.
type Table[T any] struct {
	slots   []slot[T] // a power of two long; nil v marks an empty slot
	n       int
	shift   uint   // 64 - log2(len(slots))
	mult    uint64 // the multiplier of home, another at each shrink
	shrinks int    // shrinks so far, which picks mult
	iter    int    // All calls in progress: no shrinking under them
	idOf    func(*T) *grain.ID
}

type slot[T any] struct {
	h uint64
	v *T
}

const (
	minSlots = 16
	// A table grows past 3/4 full and shrinks below 1/8 full: lookups that
	// miss (an activation) probe a few slots on average, and a resize pays
	// for itself many times over before the next.
	growNum, growDen = 3, 4
	shrinkDen        = 8
)

// NewTable returns an empty table. idOf returns a pointer to the identity
// an entry is for, which must not change while the entry is in the table.
func NewTable[T any](idOf func(*T) *grain.ID) *Table[T] {
	t := &Table[T]{idOf: idOf}
	t.resize(minSlots)
	return t
}

// home is the first slot h probes. The hash is multiplied and its top bits
// taken, because the low bits are shared by every identity of a partition:
// they chose the partition.
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

// find returns the slot of id (hash h), or -1.
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

// Get returns the entry for id, whose hash is h.
func (t *Table[T]) Get(id grain.ID, h uint64) (*T, bool) {
	if i := t.find(id, h); i >= 0 {
		return t.slots[i].v, true
	}
	return nil, false
}

// Put inserts v for id (hash h). It reports false, and changes nothing, if
// id already has an entry (the single-activation rule is enforced here, not
// trusted) or v is nil.
func (t *Table[T]) Put(id grain.ID, h uint64, v *T) bool {
	if v == nil || t.find(id, h) >= 0 {
		return false
	}
	if (t.n+1)*growDen > len(t.slots)*growNum {
		t.resize(2 * len(t.slots))
	}
	t.insert(h, v)
	t.n++
	return true
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
	i := t.find(id, h)
	if i < 0 {
		return
	}
	t.removeAt(uint64(i))
	t.n--
	if t.iter == 0 && len(t.slots) > minSlots && t.n*shrinkDen < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// removeAt empties slot i and moves back the entries after it in its probe
// run that would otherwise no longer be found from their home slot.
func (t *Table[T]) removeAt(i uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := (i + 1) & mask; t.slots[j].v != nil; j = (j + 1) & mask {
		k := t.home(t.slots[j].h)
		// The entry at j stays if its home lies cyclically in (i, j].
		if (i < j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = slot[T]{}
}

func (t *Table[T]) resize(n int) {
	old := t.slots
	if n < len(old) || t.mult == 0 {
		t.mult = multiplier(t.shrinks)
		t.shrinks++
	}
	t.slots = make([]slot[T], n)
	t.shift = 64
	for m := n; m > 1; m >>= 1 {
		t.shift--
	}
	for _, s := range old {
		if s.v != nil {
			t.insert(s.h, s.v)
		}
	}
}

// Len returns the number of entries.
func (t *Table[T]) Len() int { return t.n }

// All calls f for each entry until f returns false. f may delete the entry
// it is given, nothing else.
func (t *Table[T]) All(f func(grain.ID, *T) bool) {
	t.iter++
	defer func() { t.iter-- }()
	// Start just after an empty slot: entries only ever move back within
	// their probe run, which then never wraps past the start, so a deletion
	// by f can move an entry into the slot being visited, never past it.
	mask := len(t.slots) - 1
	start := 0
	for t.slots[start].v != nil {
		start++
	}
	for k := 1; k <= len(t.slots); k++ {
		i := (start + k) & mask
		for {
			v := t.slots[i].v
			if v == nil {
				break
			}
			if !f(*t.idOf(v), v) {
				return
			}
			if t.slots[i].v == v {
				break // not deleted: on to the next slot
			}
			// deleted, and maybe replaced by a later entry: visit slot i again
		}
	}
}
