package queues_test

import (
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
	_, _ = a.PushLateOrWait(&call) // a is busy again
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
