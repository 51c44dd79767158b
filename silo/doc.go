// Package silo is Granary's runtime: it hosts grains in one process.
//
// A program creates a silo with New, registers grain kinds with Register,
// calls Start, and then talks to grains by identity with Tell (one-way) and
// Call (typed request/reply). Grains are activated on their first message and
// deactivated when idle — or sooner, when a cap on their number
// (Config.MaxActivations) or on the memory they hold (Config.MemoryLimit)
// calls for it; callers never create or destroy one, and OnDeactivate learns
// why it runs (grain.Context.DeactivationReason).
//
// # Execution model
//
// The silo has a fixed set of partitions (Config.Partitions, GOMAXPROCS by
// default). A grain's identity hashes (xxhash) to one partition, and every
// message for it goes through that partition's queue. One goroutine at a time
// owns a partition and runs the turns of its grains, so a grain never runs
// two turns at once and its state needs no lock; different partitions run in
// parallel. A grain's messages reach it in the order they were pushed,
// whoever sent them (interleaving and stateless workers aside); one a grain
// sent from a turn — the next hop of a call under way — runs ahead of those
// queued earlier for other grains, so a burst of calls is answered call by
// call, not all at its end. When a turn blocks (a Call, I/O, a sleep) for
// longer than Config.HandoffThreshold, or calls another grain, the partition
// is handed to a new goroutine while the blocked grain's own later messages
// wait for it in order — at once for a wait in Await, a turn of a kind
// registered WithBlockingTurns, and an OnActivate or OnDeactivate of a kind
// whose hooks have been blocking. A grain sent a flood of messages shares its
// partition a time slice at a time — a few of its turns when they are slow,
// a few milliseconds when they are quick — so the partition's other grains
// do not wait for the whole flood; its senders — and no one else's — wait
// for room once its backlog is full. With more than one core, a message for
// another grain that comes while the flood runs one of its slow turns (50 µs
// or more) does not wait for it either: its sender hands the partition to a
// new goroutine, which runs the message at once while the flood's turn
// finishes beside it (Stats.StepOffs); one that comes between its turns
// ends the flood's steps at the next. The callers a flooded partition
// answers run before the flood's next steps. See docs/architecture.md and
// docs/calls.md.
//
// A grain runs one turn at a time unless its kind says otherwise, and then
// only while a turn waits — in a Call, or in Await: WithReentrant lets every
// message in, WithMayInterleave those its predicate takes (a status query,
// say), and AllowCallChainReentrancy a call back on the turn's own chain.
// The grain's code still never runs on two goroutines at once
// (docs/calls.md).
//
// A kind registered WithStatelessWorker is the exception to one activation
// per identity: an identity may have several, each in a partition of its
// own, for work that keeps no state and should run in parallel.
//
// Code outside the silo — a client's connection, a test — hears from grains
// through an Observer (NewObserver): an ID that grains tell like any
// grain's, its messages read from a channel; grain.Observers is the
// subscriber list a grain keeps of them.
//
// grain.Filters run around every message turn — the silo's (Config.Filters)
// outermost, then the kind's (WithFilters) — for logging, metrics, tracing
// or refusing a message; they are part of the turn (docs/guide.md).
//
// # Failure
//
// Every message is handled or becomes a dead letter with a reason
// (SubscribeDeadLetters, Stats); an ask that cannot be answered fails at once
// with an error naming why. A panic in a handler reaches the caller as a
// *grain.PanicError, and the kind's supervision policy decides whether the
// grain resumes, restarts or stops; a handler that ends its goroutine with
// runtime.Goexit (t.FailNow in a test) fails its turn the same way
// (ErrGoexit). A call that would deadlock — on its own call chain, or in a
// cycle of grains whose turns, on different chains, each wait for the next —
// fails at once with ErrCallCycle. An activation that keeps failing is
// retried under the kind's restart limits, not by every message. Shutdown
// and Close never wait for the turn that called them. See docs/lifecycle.md,
// docs/calls.md and docs/failures.md.
//
// What no caller can be told — a tell's turn that failed, a tell that
// became a dead letter, a slow turn — goes to Config.Logger (slog.Default()
// unless set), a storm of it sampled (Config.LogSampling), and is counted in
// Stats whole. With
// Config.ProfileLabels, CPU and goroutine profiles split by grain kind.
//
// Concurrency: a Silo is safe for concurrent use by any number of
// goroutines. Config and KindOption values are copied at New and Register.
package silo
