package silo

import (
	"context"
	"runtime/pprof"
)

// ProfileLabelKind is the pprof label that Config.ProfileLabels sets to the
// kind of the grain whose turn a goroutine runs.
const ProfileLabelKind = "granary.kind"

// kindLabels returns the context that carries a kind's profile labels, for
// pprof.SetGoroutineLabels: a carrier of labels only, never a caller's ctx.
func kindLabels(name string) context.Context {
	return pprof.WithLabels(context.Background(), pprof.Labels(ProfileLabelKind, name))
}

// label marks w's goroutine with k's profile labels if the silo labels
// turns (k.labels is set) and the goroutine's last turn was of another
// kind. A worker is one goroutine's, so what it labeled last is what the
// goroutine has; a new worker — a handoff's, an interleaved turn's — starts
// with none and labels its first turn.
func (w *worker) label(k *kind) {
	if k.labels != nil && w.labeled != k {
		pprof.SetGoroutineLabels(k.labels)
		w.labeled = k
	}
}
