package silo

import (
	"fmt"
	"strings"
	"testing"
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
