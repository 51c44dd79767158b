package grain

import (
	"testing"
	"unsafe"
)

// The silo's send path reads an ID's kind in place, as the string at the
// start of the ID (silo/kindcache.go: kindName), to spare a copy of the
// whole ID that stalls on store forwarding. Keep kind the first field.
func TestTheKindIsTheIDsFirstField(t *testing.T) {
	var id ID
	if off := unsafe.Offsetof(id.kind); off != 0 {
		t.Fatalf("ID.kind is at offset %d; silo's kindName reads it at 0", off)
	}
	for _, id := range []ID{NewID("player", "p1"), NewIntID("cart", 42), {}} {
		if got := *(*string)(unsafe.Pointer(&id)); got != id.Kind() {
			t.Fatalf("the string at the start of %#v is %q, its kind %q", id, got, id.Kind())
		}
	}
}
