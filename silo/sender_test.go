package silo

import (
	"fmt"
	"testing"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
)

func newTestAct(id grain.ID) *act {
	return &act{Activation: activation.Activation{ID: id}}
}

// The cache may only save allocations: whatever the collisions, the
// metadata it returns names the activation asked about.
func TestSenderCacheAlwaysNamesTheSender(t *testing.T) {
	var c senderCache
	acts := make([]*act, 1000) // far more than its slots: collisions
	for i := range acts {
		acts[i] = newTestAct(grain.NewID("talker", fmt.Sprint(i)))
	}
	for round := range 3 {
		for i := range acts {
			a := acts[(i*7+round)%len(acts)]
			if m := c.meta(a); m.Sender != a.ID || m.Tick != nil {
				t.Fatalf("meta for %v names %v (tick %v)", a.ID, m.Sender, m.Tick)
			}
		}
	}
	// The same identity reactivated in a new record, and a record whose
	// slot another grain took meanwhile, are still named right.
	for i := range acts {
		old := acts[i]
		acts[i] = newTestAct(old.ID)
		if m := c.meta(acts[i]); m.Sender != old.ID {
			t.Fatalf("reactivated %v named %v", old.ID, m.Sender)
		}
	}
}

// A grain sending again before another sender took its slot reuses its
// metadata: no allocation.
func TestSenderCacheReusesARecentSendersMeta(t *testing.T) {
	var c senderCache
	a, b := newTestAct(grain.NewID("talker", "a")), newTestAct(grain.NewID("talker", "b"))
	ma := c.meta(a)
	if c.meta(a) != ma {
		t.Fatal("a second send of the same grain made new metadata")
	}
	if n := testing.AllocsPerRun(100, func() { c.meta(a) }); n != 0 {
		t.Fatalf("a cached sender allocated %v times", n)
	}
	if c.meta(b).Sender != b.ID {
		t.Fatal("wrong sender")
	}
}
