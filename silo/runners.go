package silo

import "sync"

// runners runs the goroutines that take over a partition from a turn that
// blocks, and those of interleaved turns, on goroutines kept from earlier
// ones. A new goroutine starts on a small stack, and a partition's loop
// runs deep (the owner's round, the turn, the handler, the handler's own
// calls): each fresh goroutine grew its stack, copying it, on its first
// turns — half the CPU of a call made from a turn, in profiles. A goroutine
// whose work is done waits for the next instead, up to maxIdle of them.
//
// runners is safe for concurrent use.
type runners struct {
	jobs    chan task // unbuffered: a send succeeds only if a runner waits
	quit    chan struct{}
	maxIdle int32

	mu      sync.Mutex
	idle    int32 // runners waiting for a job
	started int   // goroutines started, for tests
	wg      sync.WaitGroup
}

// idleRunnersPerPartition bounds the goroutines kept waiting: enough for
// the turns that block at once in a busy silo, few enough that a burst of
// blocked turns does not leave thousands of stacks behind.
const idleRunnersPerPartition = 16

func newRunners(maxIdle int) *runners {
	return &runners{jobs: make(chan task), quit: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// task is a runner's job. A *worker is one (the partition it takes over),
// so a handoff launches it without allocating a closure; taskFunc makes
// any func one.
type task interface{ runTask() }

type taskFunc func()

func (f taskFunc) runTask() { f() }

// launch runs f on a waiting runner, or on a new goroutine.
// It never blocks.
func (r *runners) launch(f task) {
	select {
	case r.jobs <- f:
	default:
		r.mu.Lock()
		r.started++
		r.mu.Unlock()
		r.wg.Add(1)
		go r.loop(f)
	}
}

func (r *runners) loop(f task) {
	defer r.wg.Done()
	for {
		f.runTask()
		f = nil // the job is not kept while waiting
		if !r.park() {
			return
		}
		select {
		case f = <-r.jobs:
			r.unpark()
		case <-r.quit:
			r.unpark()
			return
		}
	}
}

// park counts the caller among the waiting runners, unless enough wait.
func (r *runners) park() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idle >= r.maxIdle {
		return false
	}
	r.idle++
	return true
}

func (r *runners) unpark() {
	r.mu.Lock()
	r.idle--
	r.mu.Unlock()
}

// stop makes waiting runners return, and those still running return when
// their job ends. wait says whether to wait for them all: only once no job
// can still be running.
func (r *runners) stop(wait bool) {
	close(r.quit)
	if wait {
		r.wg.Wait()
	}
}
