package queues_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Producers push; the one consumer takes everything queued in one Drain,
// control items first, and reads the messages in place.
func ExampleQueue() {
	q := queues.New[string, string](1000)
	_ = q.Push("move p1")
	_ = q.Push("move p2")
	q.PushControl("turn done")

	batch, ctl := q.Drain(nil)
	fmt.Println(ctl)
	for m := batch.Next(); m != nil; m = batch.Next() {
		fmt.Println(*m)
	}
	q.Close()
	fmt.Println(q.Push("late"))
	// Output:
	// [turn done]
	// move p1
	// move p2
	// granary: queue closed
}

// The partition of an identity depends only on the identity and the number
// of partitions: the same in every process.
func ExamplePartitioner() {
	p, _ := queues.NewPartitioner(8)
	id := grain.NewID("player", "p1")
	fmt.Println(p.Partition(id) == p.PartitionOf(id.Hash()), p.Partition(id) < p.N())
	// Output: true true
}

// A graceful stop of two queues: Restrict refuses new work, the work under
// way still pushes late, and the set is quiet once both queues are idle at
// once — a late push to an idle queue counts it busy again.
func ExampleQueue_Restrict() {
	var busy atomic.Int64
	a, b := queues.New[string, string](0), queues.New[string, string](0)
	busy.Store(2) // both busy until they say otherwise
	a.Restrict(&busy)
	b.Restrict(&busy)

	fmt.Println(a.Push("from outside"))
	_, last := a.MarkIdle()
	fmt.Println("a idle, last:", last)
	call := "a call from b's turn"
	_, _, _ = a.PushLateOrWait(&call, nil) // a is busy again
	_, last = b.MarkIdle()
	fmt.Println("b idle, last:", last)
	batch, _ := a.Drain(nil)
	fmt.Println(*batch.Next())
	_, last = a.MarkIdle()
	fmt.Println("a idle, last:", last)
	// Output:
	// granary: queue closed
	// a idle, last: false
	// b idle, last: false
	// a call from b's turn
	// a idle, last: true
}

// An envelope crosses to another silo as bytes: the application encodes its
// messages (JSON here), the wire form carries the rest. An ask's reply
// handle stays behind; its Call — chain and deadline — goes with it.
func ExampleAppendEnvelope() {
	type Move struct{ X, Y int }
	enc := queues.MessageEncoderFunc(func(b []byte, msg any) ([]byte, error) {
		j, err := json.Marshal(msg)
		return append(b, j...), err
	})
	dec := queues.MessageDecoderFunc(func(b []byte) (any, error) {
		var m Move
		err := json.Unmarshal(b, &m)
		return m, err
	})

	env := queues.Envelope{
		Target: grain.NewID("player", "p1"),
		Msg:    Move{X: 3, Y: 4},
		Meta:   &queues.Meta{Sender: grain.NewID("lobby", "main")},
	}
	frame, err := queues.AppendEnvelope(nil, &env, enc)
	if err != nil {
		panic(err)
	}

	got, call, rest, err := queues.DecodeEnvelope(frame, dec)
	fmt.Println(got.Target, got.Sender(), got.Msg, call == nil, len(rest), err)

	_, _, _, err = queues.DecodeEnvelope(frame[:len(frame)-1], dec)
	fmt.Println(errors.Is(err, queues.ErrMalformedEnvelope))
	// Output:
	// player/p1 lobby/main {3 4} true 0 <nil>
	// true
}
