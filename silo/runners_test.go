package silo

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (r *runners) counts() (idle int32, started int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.idle, r.started
}

// A runner whose job is done takes the next one, and no more than maxIdle
// wait; stop lets the waiting ones go.
func TestRunnersReuseGoroutines(t *testing.T) {
	r := newRunners(2)
	waitIdle := func(n int32) {
		t.Helper()
		require.Eventually(t, func() bool { idle, _ := r.counts(); return idle == n }, 5*time.Second, time.Millisecond)
	}
	done := make(chan struct{})
	r.launch(taskFunc(func() { close(done) }))
	<-done
	waitIdle(1)
	done = make(chan struct{})
	r.launch(taskFunc(func() { close(done) }))
	<-done
	waitIdle(1)
	_, started := r.counts()
	assert.Equal(t, 1, started, "the second job ran on the first job's goroutine")

	// Three at once: a third goroutine starts; once all are done, two wait.
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 3 {
		wg.Add(1)
		r.launch(taskFunc(func() { wg.Done(); <-gate }))
	}
	wg.Wait() // all three run at once
	_, started = r.counts()
	assert.Equal(t, 3, started)
	close(gate)
	waitIdle(2)

	r.stop(true) // returns once every runner has returned
	idle, _ := r.counts()
	assert.Zero(t, idle)
}
