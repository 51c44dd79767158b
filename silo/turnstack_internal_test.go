package silo

import (
	"context"
	"testing"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
)

// onTurnStack finds a turn under the caller however deep it is — past the
// short stack it reads first — and none where there is none.
func TestOnTurnStackFindsATurnAtAnyDepth(t *testing.T) {
	assert := func(want bool, depth int) {
		t.Helper()
		if got := deepCall(depth, onTurnStack); got != want {
			t.Errorf("onTurnStack at depth %d: %v, want %v", depth, got, want)
		}
	}
	assert(false, 0)
	assert(false, 200)
	for _, depth := range []int{0, 10, 63, 64, 65, 200} {
		var got bool
		g := grain.Func(func(context.Context, *grain.Context, any) (any, error) {
			got = deepCall(depth, onTurnStack)
			return nil, nil
		})
		if _, err := activation.Run(context.Background(), g, &grain.Context{}, struct{}{}); err != nil {
			t.Fatal(err)
		}
		if !got {
			t.Errorf("onTurnStack %d frames under activation.Run: false", depth)
		}
	}
}

// deepCall calls f under depth more frames.
//
//go:noinline
func deepCall(depth int, f func() bool) bool {
	if depth == 0 {
		return f()
	}
	return deepCall(depth-1, f)
}

// BenchmarkOnTurnStack: what a checked silo's call from outside a turn
// pays to learn it is not from one (foreignctx.go), the caller 20 frames
// deep.
func BenchmarkOnTurnStack(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		deepCall(20, onTurnStack)
	}
}
