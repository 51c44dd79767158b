package queues_test

import (
	"fmt"

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
