package directory

import "github.com/granary-go/granary/grain"

// Table is one partition's activation table: at most one V per identity.
// The zero Table is not usable; call NewTable. It is not safe for concurrent
// use.
type Table[V any] struct {
	m map[grain.ID]V
}

// NewTable returns an empty table.
func NewTable[V any]() *Table[V] { return &Table[V]{m: make(map[grain.ID]V)} }

// Get returns the entry for id.
func (t *Table[V]) Get(id grain.ID) (V, bool) {
	v, ok := t.m[id]
	return v, ok
}

// Put inserts v for id. It reports false, and changes nothing, if id already
// has an entry: the single-activation rule is enforced here, not trusted.
func (t *Table[V]) Put(id grain.ID, v V) bool {
	if _, ok := t.m[id]; ok {
		return false
	}
	t.m[id] = v
	return true
}

// Delete removes the entry for id.
func (t *Table[V]) Delete(id grain.ID) { delete(t.m, id) }

// Len returns the number of entries.
func (t *Table[V]) Len() int { return len(t.m) }

// All calls f for each entry until f returns false. f must not modify t.
func (t *Table[V]) All(f func(grain.ID, V) bool) {
	for id, v := range t.m {
		if !f(id, v) {
			return
		}
	}
}
