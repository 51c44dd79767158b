package silo

import "testing"

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
