package silo

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// A walk that comes back to env's caller's own turn, let in beside the
// caller's waiting turn, while it looks at that turn's other calls
// (walk.callerWaits), has found the loop — not a reason to look at them
// again. x's turn calls y, letting its chain back in; y calls x back, and
// that turn, n, calls z and w at once; z's and w's turns each call y. From
// n's call to z, the walk goes z, y, and into n (walk.within): env is
// n's, so it looks at n's call to w, whose walk goes w, y, n again. (It
// looked again from there, round and round, until past maxCycle steps: no
// verdict, found by the chaos program.)
func TestADeadlockWalkBackIntoTheCallersTurnLetInIsALoop(t *testing.T) {
	s := walkSilo(t)
	ctx := t.Context()
	x, y, z, w := grain.NewID("a", "x"), grain.NewID("a", "y"), grain.NewID("a", "z"), grain.NewID("a", "w")
	call := func(from, to grain.ID, turn *turnInfo) *queues.Request {
		r := queues.NewRequest(ctx, nil)
		s.waitsOf(from.Hash()).start(from, from.Hash(), r, to, to.Hash(), false, false, nil, turn)
		return r
	}
	call(x, y, &turnInfo{})
	back := call(y, x, &turnInfo{})
	back.Interleave = true // a call back on x's chain: let in
	n := &turnInfo{req: back}
	toZ, toW := call(x, z, n), call(x, w, n)
	call(z, y, &turnInfo{})
	call(w, y, &turnInfo{})
	env := queues.Envelope{Target: z, Hash: z.Hash(), Request: toZ, Meta: &queues.Meta{Sender: x}}
	assert.Equal(t, []grain.ID{x, z, y, x}, s.closesCycle(&env, nil))
	env = queues.Envelope{Target: w, Hash: w.Hash(), Request: toW, Meta: &queues.Meta{Sender: x}}
	assert.Equal(t, []grain.ID{x, w, y, x}, s.closesCycle(&env, nil))
}
