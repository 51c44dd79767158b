package silo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFIFOTokenGrantsInOrder(t *testing.T) {
	var tok fifoToken
	first := tok.reserve()
	select {
	case <-first:
	default:
		t.Fatal("a free token is granted at once")
	}
	claims := make([]<-chan struct{}, 100)
	for i := range claims {
		claims[i] = tok.reserve()
	}
	for i, c := range claims {
		select {
		case <-c:
			t.Fatalf("claim %d granted while the token is held", i)
		default:
		}
		tok.unlock() // the holder hands over to the oldest claim
		select {
		case <-c:
		default:
			t.Fatalf("claim %d not granted in its turn", i)
		}
		if i+1 < len(claims) {
			select {
			case <-claims[i+1]:
				t.Fatalf("claim %d granted early", i+1)
			default:
			}
		}
	}
	tok.unlock()
	tok.lock() // free again
	tok.unlock()
}

// A turn counts among its grain's waiting turns while it has calls out,
// and no longer once it has ended, whatever calls of its goroutines are
// still out: those take nothing back for it, nor count it again — and a
// call begun as it ended neither. (A call out past its turn kept the
// grain open to interleaving while no turn waited: a message let in then
// ran beside the next turn, which runs without the token.)
func TestAnEndedTurnWaitsNoMore(t *testing.T) {
	var x actExtra
	ti := &turnInfo{}
	assert.True(t, ti.leaveToken(&x, false), "its first call: the turn waits")
	assert.False(t, ti.leaveToken(&x, false), "a second")
	assert.Equal(t, int32(1), x.waiting.Load())
	ti.retakeToken(&x)
	assert.Equal(t, int32(1), x.waiting.Load(), "one call still out")
	ti.endOver(&x) // the handler returned without waiting for it
	assert.Zero(t, x.waiting.Load(), "an ended turn waits no more")
	assert.False(t, ti.leaveToken(&x, false), "a call begun as it ended")
	assert.Zero(t, x.waiting.Load())
	ti.retakeToken(&x)
	ti.retakeToken(&x)
	assert.Zero(t, x.waiting.Load())
	assert.False(t, ti.holdsToken)
	select {
	case <-x.token.reserve():
	default:
		t.Fatal("the token is free")
	}
}
