package silo

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/idle"
)

// act is the silo's record of one activation. Fields marked "owner" belong to
// the partition's owner goroutine; fields marked "turn" are written by the
// goroutine running the grain's turn and read by the owner only after the
// turn has finished (the finish travels through the owner, which orders it).
type act struct {
	activation.Activation // owner
	p                     *partition
	k                     *kind
	g                     grain.Grain // written by the activate turn, then read-only
	gen                   uint64      // owner: distinguishes activations of one ID over time
	hash                  uint64      // ID.Hash()
	idle                  idle.Entry[*act]

	running   int32 // owner: turns in flight (more than 1 only when interleaving)
	inReady   bool  // owner: listed in the partition's ready queue
	stopping  bool  // owner: stopped by supervision; refuses messages
	overfull  bool  // owner: listed in the partition's overloaded set
	deactWant bool  // owner: deactivate once no turn runs

	// turn-side requests, applied by the owner when the turn finishes
	req *turnRequests

	timers map[string]*grainTimer // owner

	// For interleaving (reentrant kinds, call-chain reentrancy): the turn
	// token, and how many turns wait in a call holding none.
	token   sync.Mutex
	waiting atomic.Int32
}

// turnRequests are what a turn asked of its own activation. Allocated on
// first use, so a grain that never asks pays nothing.
type turnRequests struct {
	mu         sync.Mutex // interleaved turns may write concurrently
	deactivate bool
	keepUntil  time.Duration
	timerOps   []timerOp
}

type timerOp struct {
	name        string
	due, period time.Duration
	msg         any
	stop        bool
}

func (a *act) requests() *turnRequests {
	if a.req == nil {
		a.req = &turnRequests{}
	}
	return a.req
}

// The methods below implement grain.Self for the grain's Context. They run
// on the turn's goroutine, so they only record requests.

func (a *act) DeactivateOnIdle() {
	r := a.requests()
	r.mu.Lock()
	r.deactivate = true
	r.mu.Unlock()
}

func (a *act) DelayDeactivation(d time.Duration) {
	r := a.requests()
	until := a.p.s.since() + d
	r.mu.Lock()
	r.keepUntil = max(r.keepUntil, until)
	r.mu.Unlock()
}

func (a *act) StartTimer(name string, due, period time.Duration, msg any) error {
	if msg == nil {
		return grain.ErrNilMessage
	}
	if due < 0 || period < 0 {
		return fmt.Errorf("%w: timer %q due %v period %v", grain.ErrInvalidConfig, name, due, period)
	}
	r := a.requests()
	r.mu.Lock()
	r.timerOps = append(r.timerOps, timerOp{name: name, due: due, period: period, msg: msg})
	r.mu.Unlock()
	return nil
}

func (a *act) StopTimer(name string) {
	r := a.requests()
	r.mu.Lock()
	r.timerOps = append(r.timerOps, timerOp{name: name, stop: true})
	r.mu.Unlock()
}

func (a *act) Now() time.Time { return a.p.s.clock.Now() }

// takeRequests returns and clears the turn's requests. Owner only, after the
// turn finished.
func (a *act) takeRequests() (deactivate bool, keepUntil time.Duration, ops []timerOp) {
	r := a.req
	if r == nil {
		return false, 0, nil
	}
	r.mu.Lock()
	deactivate, keepUntil, ops = r.deactivate, r.keepUntil, r.timerOps
	r.deactivate, r.timerOps = false, nil
	r.mu.Unlock()
	return deactivate, keepUntil, ops
}

// busy reports whether a turn of the activation runs.
func (a *act) busy() bool { return a.running > 0 }
