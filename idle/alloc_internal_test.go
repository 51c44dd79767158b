package idle

import (
	"testing"
	"time"
)

// A wheel makes its slots when the first entry is filed, not before: a
// silo has one per partition, and most of a silo's many partitions may
// never hold a grain.
func TestSlotsAreMadeWhenTheFirstEntryIsFiled(t *testing.T) {
	w, err := NewWheel[int](time.Second, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.slots != nil {
		t.Fatal("slots made up front")
	}
	if got := w.Advance(10*time.Second, nil); len(got) != 0 || w.cursor != 10 {
		t.Fatalf("advance of an empty wheel: %v, cursor %d", got, w.cursor)
	}
	var e Entry[int]
	w.Touch(&e, 12*time.Second)
	if len(w.slots) != DefaultSlots {
		t.Fatalf("%d slots after the first Touch", len(w.slots))
	}
	if got := w.Advance(12*time.Second, nil); len(got) != 1 || got[0] != &e {
		t.Fatalf("expired %v", got)
	}
}
