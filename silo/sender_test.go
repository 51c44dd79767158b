package silo

import (
	"testing"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
)

func newTestAct(id grain.ID) *act {
	return &act{Activation: activation.Activation{ID: id}}
}

// A grain names itself as a sender with metadata made once, at its first
// send, and shared by every message after: no allocation per send, however
// many other grains send meanwhile.
func TestASendersMetaIsMadeOnce(t *testing.T) {
	acts := make([]*act, 1000)
	for i := range acts {
		acts[i] = newTestAct(grain.NewIntID("talker", int64(i)))
	}
	first := make([]any, len(acts))
	for i, a := range acts {
		m := a.senderMeta()
		if m.Sender != a.ID || m.Tick != nil || m.MayInterleave {
			t.Fatalf("meta for %v: %+v", a.ID, m)
		}
		first[i] = m
	}
	for i, a := range acts {
		if a.senderMeta() != first[i] {
			t.Fatalf("%v made its metadata again", a.ID)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, a := range acts {
			a.senderMeta()
		}
	}); n != 0 {
		t.Fatalf("%v allocations for senders that sent before", n)
	}
}

// actOf finds the record from its idle entry.
func TestActOfFindsTheRecordOfAnIdleEntry(t *testing.T) {
	a := newTestAct(grain.NewID("k", "a"))
	if actOf(&a.idle) != a {
		t.Fatal("actOf(&a.idle) is not a")
	}
}
