package silo

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

func TestKindCache(t *testing.T) {
	a, b := &kind{name: "player"}, &kind{name: "cart"}
	kinds := map[string]*kind{"player": a, "cart": b}
	var c kindCache
	for range 3 {
		if k, ok := c.get("player", kinds); !ok || k != a {
			t.Fatalf("player: %v %v", k, ok)
		}
	}
	// Strings built at run time, with the same bytes at other addresses,
	// and unknown names, all answer from the map.
	built := strings.Repeat("pla", 1) + "yer"
	if k, ok := c.get(built, kinds); !ok || k != a {
		t.Fatalf("built: %v %v", k, ok)
	}
	for i := range 200 {
		name := fmt.Sprintf("k%d", i)
		if _, ok := c.get(name, kinds); ok {
			t.Fatalf("%s found", name)
		}
	}
	if k, ok := c.get("cart", kinds); !ok || k != b {
		t.Fatalf("cart: %v %v", k, ok)
	}
	if _, ok := c.get("", kinds); ok {
		t.Fatal("empty kind found")
	}
	// A prefix of a cached name shares its bytes' address but not its length.
	if _, ok := c.get("player"[:3], kinds); ok {
		t.Fatal("prefix found")
	}
}

// Kind names built at run time, each at its own address, and names whose
// bytes share a slot, cost a map lookup, never an allocation: a slot is
// filled once.
func TestKindCacheNeverAllocatesOnceFilled(t *testing.T) {
	a := &kind{name: "player"}
	kinds := map[string]*kind{"player": a}
	var c kindCache
	c.remember("player", a)
	names := make([]string, 2000)
	for i := range names {
		names[i] = strings.Clone("player")
	}
	for _, n := range names { // the free slots fill: at most one entry each
		c.get(n, kinds)
	}
	n := testing.AllocsPerRun(10, func() {
		for _, name := range names {
			if k, ok := c.get(name, kinds); !ok || k != a {
				t.Fatalf("built: %v %v", k, ok)
			}
		}
		if k, ok := c.get("player", kinds); !ok || k != a {
			t.Fatalf("constant: %v %v", k, ok)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations for %d lookups", n, len(names)+1)
	}
	// The registered constant kept its slot through all of that.
	if e := c.slot(uintptr(unsafe.Pointer(unsafe.StringData("player")))).Load(); e == nil || e.k != a {
		t.Fatal("the registered name lost its slot")
	}
}

// An entry keeps its name's address as a number: memory freed and reused
// for another name at that address must not pass for the cached kind.
func TestKindCacheConfirmsAHitByTheName(t *testing.T) {
	player, cart := &kind{name: "player"}, &kind{name: "cartxx"}
	kinds := map[string]*kind{"player": player, "cartxx": cart}
	var c kindCache
	buf := []byte("cartxx")
	name := unsafe.String(&buf[0], len(buf))
	addr := uintptr(unsafe.Pointer(&buf[0]))
	// As if "player" had been cached at this address before its memory was
	// freed and reused for buf.
	c.slot(addr).Store(&kindEntry{addr: addr, n: len(name), k: player})
	if k, ok := c.get(name, kinds); !ok || k != cart {
		t.Fatalf("got %v, %v; want the kind named %q", k, ok, name)
	}
}
