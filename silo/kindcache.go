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
// falls back to the map.
//
// A slot is filled once and never replaced: replacing made every send
// allocate an entry when two kinds' strings shared a slot (they took it in
// turns), or when the program built its kind names at run time (each at a
// new address) — an allocation per Tell. So the cache allocates at most
// once per slot in the silo's life; Register fills the slots of the names
// it is given first, since a program that registers a kind with a constant
// usually builds its IDs with the same one. Entries are immutable and hold
// their string, so an address is never reused while it is cached.
type kindCache struct {
	slots [256]atomic.Pointer[kindEntry]
}

type kindEntry struct {
	data *byte
	n    int
	k    *kind
}

func (c *kindCache) slot(data *byte) *atomic.Pointer[kindEntry] {
	return &c.slots[(uintptr(unsafe.Pointer(data))>>4)%uintptr(len(c.slots))]
}

func (c *kindCache) get(name string, kinds map[string]*kind) (*kind, bool) {
	data := unsafe.StringData(name)
	slot := c.slot(data)
	e := slot.Load()
	if e != nil && e.data == data && e.n == len(name) {
		return e.k, true
	}
	k, ok := kinds[name]
	if ok && data != nil && e == nil {
		slot.CompareAndSwap(nil, &kindEntry{data: data, n: len(name), k: k})
	}
	return k, ok
}

// remember fills the slot of name's bytes with k, if it is free.
func (c *kindCache) remember(name string, k *kind) {
	if data := unsafe.StringData(name); data != nil {
		c.slot(data).CompareAndSwap(nil, &kindEntry{data: data, n: len(name), k: k})
	}
}
