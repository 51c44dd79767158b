package main

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Example runs the demo: 8 goroutines × 1,000 increments to one grain.
func Example() {
	n, err := run(context.Background())
	fmt.Println(n, err)
	// Output: 8000 <nil>
}
