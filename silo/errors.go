package silo

import (
	"errors"
	"fmt"

	"github.com/granary-go/granary/grain"
)

// errNilSilo is what a method reached through a nil *Silo returns.
var errNilSilo = fmt.Errorf("%w: nil *Silo", grain.ErrSiloClosed)

// errNotNew is what a Silo not made by New returns: its zero value has no
// partitions to run (unlike net/http.Server, a silo needs New).
var errNotNew = fmt.Errorf("%w: a Silo must be made by silo.New", grain.ErrSiloClosed)

// made reports why s cannot be used, if it cannot: nil, or not made by New.
func (s *Silo) made() error {
	switch {
	case s == nil:
		return errNilSilo
	case s.done == nil:
		return errNotNew
	}
	return nil
}

// The sentinels callers of a silo match most, re-exported from package
// grain (they are the same values, so errors.Is works with either name).
var (
	// ErrSiloClosed: the silo is not started, is shutting down, or has shut
	// down, like net/http's ErrServerClosed.
	ErrSiloClosed = grain.ErrSiloClosed
	// ErrUnknownKind: no kind of that name is registered.
	ErrUnknownKind = grain.ErrUnknownKind
	// ErrOverloaded: the grain's backlog is full while its turns cannot run
	// (WithMaxBacklog), or the grain's backlog or the partition queue
	// stayed full until the sender's ctx ended (then the ctx's error is
	// wrapped too).
	ErrOverloaded = grain.ErrOverloaded
	// ErrGrainStopped: the grain was stopped (Silo.Stop, or its supervision
	// policy) before it could handle the message.
	ErrGrainStopped = grain.ErrGrainStopped
	// ErrCallCycle: the call would deadlock on a grain waiting in its chain.
	ErrCallCycle = grain.ErrCallCycle
	// ErrCallTooDeep: the call chain would pass Config.MaxCallDepth.
	ErrCallTooDeep = grain.ErrCallTooDeep
	// ErrTimeout: a call got no reply in time.
	ErrTimeout = grain.ErrTimeout
	// ErrNilContext: a nil ctx was passed; nothing was sent or stopped.
	ErrNilContext = grain.ErrNilContext
)

// ErrNotStarted is what a send, a Stop, a Deactivate or ActiveGrains
// returns before Start. It matches ErrSiloClosed too — a silo not yet
// started takes nothing, as one shut down takes nothing — so code that
// checks for a closed silo holds; a caller that starts serving before its
// silo is up can tell the two apart.
var ErrNotStarted = fmt.Errorf("%w: not started", grain.ErrSiloClosed)

// ErrShutdownFromTurn is what Shutdown returns when called from a grain's
// turn (of any silo): a shutdown waits for every turn to end, the calling
// one included, so it cannot be waited for there. The shutdown has begun;
// the silo stops once the calling turn has returned, and Done reports when.
var ErrShutdownFromTurn = errors.New("granary: Shutdown called from a turn: begun, not waited for")

// ErrGoexit is the panic value of a turn whose handler called
// runtime.Goexit — as t.FailNow (require.*) does inside a handler under
// test. The turn fails as if it had panicked: its caller gets a
// *grain.PanicError wrapping ErrGoexit, and the kind's supervision applies.
var ErrGoexit = errors.New("granary: the handler called runtime.Goexit")

// ErrNilFunc is what Await returns for a nil wait: nothing ran.
var ErrNilFunc = errors.New("granary: nil func")
