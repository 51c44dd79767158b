package silo

import (
	"sync/atomic"
	"unsafe"

	"github.com/granary-go/granary/grain"
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
// usually builds its IDs with the same one.
//
// An entry keeps the address as a number, not a pointer: a kind name cut
// from a large buffer (a request body) must not keep the buffer alive for
// the silo's life. Once that memory is freed its address may hold another
// string, so a hit is confirmed against the kind's own name — by address
// when the caller uses the registered string, by bytes otherwise. Entries
// are immutable.
type kindCache struct {
	slots [256]atomic.Pointer[kindEntry]
}

type kindEntry struct {
	addr uintptr // of the name's bytes; not a pointer, so nothing is kept alive
	n    int
	k    *kind
}

func (c *kindCache) slot(addr uintptr) *atomic.Pointer[kindEntry] {
	return &c.slots[(addr>>4)%uintptr(len(c.slots))]
}

func (c *kindCache) get(name string, kinds map[string]*kind) (*kind, bool) {
	addr := uintptr(unsafe.Pointer(unsafe.StringData(name)))
	slot := c.slot(addr)
	e := slot.Load()
	if e != nil && e.addr == addr && e.n == len(name) &&
		(unsafe.StringData(e.k.name) == unsafe.StringData(name) || e.k.name == name) {
		return e.k, true
	}
	k, ok := kinds[name]
	if ok && addr != 0 && e == nil {
		slot.CompareAndSwap(nil, &kindEntry{addr: addr, n: len(name), k: k})
	}
	return k, ok
}

// remember fills the slot of name's bytes with k, if it is free.
func (c *kindCache) remember(name string, k *kind) {
	if addr := uintptr(unsafe.Pointer(unsafe.StringData(name))); addr != 0 {
		c.slot(addr).CompareAndSwap(nil, &kindEntry{addr: addr, n: len(name), k: k})
	}
}

// kindName returns id.Kind() without copying the ID. The inlined accessor
// copies all 48 bytes with 16-byte loads, which wait for the 8-byte stores
// that spilled the ID moments before (no store forwarding across them):
// reading the one field in place made `tell` 5–11 % faster on two Ps and
// 2.5 % on one, `zipf` 6–7 % (docs/performance-log.md, item 31). The kind is
// grain.ID's first field, a string (grain's TestTheKindIsTheIDsFirstField
// keeps it there).
func kindName(id *grain.ID) string { return *(*string)(unsafe.Pointer(id)) }
