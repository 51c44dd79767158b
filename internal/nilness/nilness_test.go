package nilness_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/internal/nilness"
)

func TestOf(t *testing.T) {
	var (
		p   *int
		m   map[string]int
		s   []int
		f   func()
		ch  chan int
		up  unsafe.Pointer
		err error
	)
	for _, v := range []any{nil, p, m, s, f, ch, up, err} {
		assert.True(t, nilness.Of(v), "%T", v)
	}
	x := 1
	for _, v := range []any{&x, map[string]int{}, []int{}, func() {}, make(chan int), 0, "", struct{}{}, errors.New("e")} {
		assert.False(t, nilness.Of(v), "%T", v)
	}
}
