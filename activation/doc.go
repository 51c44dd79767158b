// Package activation holds what a silo knows about one live grain and the
// code that runs its turns.
//
// An Activation is a state machine with no goroutine of its own: the
// partition that owns it moves it through its lifecycle
//
//	Activating -> Active -> Deactivating -> Gone
//	Active -> Backoff -> Activating   (restart after a failure)
//	Active -> Deactivating -> Backoff (the same, after the failed instance's OnDeactivate)
//	Activating -> Backoff             (a fresh record that waits out the restart's backoff)
//	Activating -> Gone                (activation failed)
//
// and Transition rejects every other move. Its Mailbox holds the messages that
// arrived while a turn was running. Run executes one turn on the calling
// goroutine and recovers a panic into a *grain.PanicError (the silo times
// turns with its watchdog, not per turn). Supervision decides, from a pure
// function of the failure history and the clock reading it is given, what a
// failure does to the activation; a runtime keeps the history (Restarts)
// only for grains that restart.
//
// Concurrency: nothing in this package is safe for concurrent use. An
// Activation is owned by its partition; Run is called by whichever goroutine
// holds the grain's turn.
package activation
