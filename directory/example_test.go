package directory_test

import (
	"fmt"

	"github.com/granary-go/granary/directory"
	"github.com/granary-go/granary/grain"
)

type record struct {
	id    grain.ID
	turns int
}

// A Table holds at most one record per identity, found by the identity's
// hash, which the sender computed once.
func ExampleTable() {
	t, err := directory.NewTable[record](func(r *record) *grain.ID { return &r.id })
	if err != nil {
		panic(err)
	}
	p1 := &record{id: grain.NewID("player", "p1")}
	fmt.Println(t.Put(p1.id, p1.id.Hash(), p1))
	fmt.Println(t.Put(p1.id, p1.id.Hash(), &record{id: p1.id})) // one activation per identity

	r, ok := t.Get(grain.NewID("player", "p1"), p1.id.Hash())
	r.turns++
	fmt.Println(ok, p1.turns, t.Len())
	t.Delete(p1.id, p1.id.Hash())
	_, ok = t.Get(p1.id, p1.id.Hash())
	fmt.Println(ok, t.Len())
	// Output:
	// true
	// false
	// true 1 1
	// false 0
}
