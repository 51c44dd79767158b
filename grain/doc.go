// Package grain defines what a grain is to the people who write one: its
// identity (ID), the interface it implements (Grain, with the optional
// Activator and Deactivator hooks), the Context a turn receives, the Filter
// that runs around a kind's turns, the Observers list a grain notifies, and
// the errors a caller can match with errors.Is and errors.As.
//
// A grain is a virtual actor: an object that owns its state and is reached by
// its identity, a kind plus a key. Nobody creates or destroys a grain; a
// runtime (package silo) activates it on its first message and deactivates it
// when it has been idle. The runtime runs at most one turn of a grain at a
// time, so a grain's fields need no lock.
//
// Concurrency: ID is an immutable value, safe for concurrent use. Observers
// belongs to one grain's state and is not safe for concurrent use. A Context
// belongs to one turn and must not be used after the turn has returned, nor
// from another goroutine: a silo reuses it for its worker's next turn — a
// kept one reads another grain's — unless its Config.CheckContexts gives
// each turn its own, which panics once its turn has ended (Context.Check).
package grain
