package directory

import "github.com/granary-go/granary/grain"

// Table is one partition's activation table: at most one V per identity.
// It is keyed by the identity's 64-bit hash (computed once, when the message
// was sent), which makes a lookup a map access on a uint64; the identity is
// compared too, so two identities whose hashes collide still get separate
// entries. The zero Table is not usable; call NewTable. It is not safe for
// concurrent use.
type Table[V any] struct {
	m        map[uint64]slot[V]
	overflow map[grain.ID]V // identities whose hash is taken by another
	idOf     func(V) *grain.ID
}

// slot keeps a pointer to the entry's identity next to it, so a lookup
// compares identities without calling out.
type slot[V any] struct {
	id *grain.ID
	v  V
}

// NewTable returns an empty table. idOf returns a pointer to the identity
// an entry is for, which must not change while the entry is in the table.
func NewTable[V any](idOf func(V) *grain.ID) *Table[V] {
	return &Table[V]{m: make(map[uint64]slot[V]), overflow: make(map[grain.ID]V), idOf: idOf}
}

// Get returns the entry for id, whose hash is h.
func (t *Table[V]) Get(id grain.ID, h uint64) (V, bool) {
	if s, ok := t.m[h]; ok && *s.id == id {
		return s.v, true
	}
	if len(t.overflow) > 0 {
		v, ok := t.overflow[id]
		return v, ok
	}
	var zero V
	return zero, false
}

// Put inserts v for id (hash h). It reports false, and changes nothing, if
// id already has an entry: the single-activation rule is enforced here, not
// trusted.
func (t *Table[V]) Put(id grain.ID, h uint64, v V) bool {
	if _, ok := t.Get(id, h); ok {
		return false
	}
	if _, taken := t.m[h]; taken {
		t.overflow[id] = v
		return true
	}
	t.m[h] = slot[V]{id: t.idOf(v), v: v}
	return true
}

// Delete removes the entry for id (hash h).
func (t *Table[V]) Delete(id grain.ID, h uint64) {
	if s, ok := t.m[h]; ok && *s.id == id {
		delete(t.m, h)
		return
	}
	delete(t.overflow, id)
}

// Len returns the number of entries.
func (t *Table[V]) Len() int { return len(t.m) + len(t.overflow) }

// All calls f for each entry until f returns false. f may delete the entry
// it is given, nothing else.
func (t *Table[V]) All(f func(grain.ID, V) bool) {
	for _, s := range t.m {
		if !f(*s.id, s.v) {
			return
		}
	}
	for id, v := range t.overflow {
		if !f(id, v) {
			return
		}
	}
}
