package silo

import (
	"sync/atomic"
	"unsafe"
)

// kindCache remembers, for the strings a program passes as kinds, which
// registered kind they name, keyed by the address of the string's bytes: a
// program that builds its IDs from a constant or a variable passes the same
// bytes every time, so a send costs a pointer compare instead of hashing the
// kind name. A miss (a kind name built at run time, or a slot collision)
// falls back to the map. Entries are immutable; slots are replaced
// atomically.
type kindCache struct {
	slots [64]atomic.Pointer[kindEntry]
}

type kindEntry struct {
	data *byte
	n    int
	k    *kind
}

func (c *kindCache) get(name string, kinds map[string]*kind) (*kind, bool) {
	data := unsafe.StringData(name)
	slot := &c.slots[(uintptr(unsafe.Pointer(data))>>4)%uintptr(len(c.slots))]
	if e := slot.Load(); e != nil && e.data == data && e.n == len(name) {
		return e.k, true
	}
	k, ok := kinds[name]
	if ok && data != nil {
		slot.Store(&kindEntry{data: data, n: len(name), k: k})
	}
	return k, ok
}
