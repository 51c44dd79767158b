package silo

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (r *runners) counts() (idle int32, started int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.idle, r.started
}

// A runner whose job is done takes the next one, and no more than maxIdle
// wait; stop lets the waiting ones go. In a synctest bubble: a runner
// counts itself idle just before it waits for a job, and a job launched in
// between starts a goroutine of its own — under load, a test that waited
// for the count alone sometimes saw that (three loaded -race binaries).
// synctest.Wait returns once every runner is waiting.
func TestRunnersReuseGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunners(2)
		settled := func(wantIdle int32) {
			t.Helper()
			synctest.Wait()
			idle, _ := r.counts()
			require.Equal(t, wantIdle, idle)
		}
		done := make(chan struct{})
		r.launch(taskFunc(func() { close(done) }))
		<-done
		settled(1)
		done = make(chan struct{})
		r.launch(taskFunc(func() { close(done) }))
		<-done
		settled(1)
		_, started := r.counts()
		assert.Equal(t, 1, started, "the second job ran on the first job's goroutine")

		// Three at once: two more goroutines start; once all are done, two wait.
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
		settled(2)

		r.stop(true) // returns once every runner has returned
		idle, _ := r.counts()
		assert.Zero(t, idle)
	})
}
