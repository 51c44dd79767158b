package main

import (
	"context"
	"sync"
	"time"
)

// Records is where players' records live between activations: a player
// loads its record as it activates and saves it as it deactivates — idle,
// evicted, or at the shutdown — as an Orleans grain reads and writes its
// persistent state. A player that is never deactivated gracefully (Close,
// a crash) loses what it won since it last saved; a real deployment that
// cannot afford that saves on each result too.
//
// Implementations must be safe for concurrent use: the players of every
// partition load and save at once. memRecords keeps them in memory, for
// the life of the process; a database is the same two methods.
type Records interface {
	// Load returns name's record, and false if it has none yet.
	Load(ctx context.Context, name string) (PlayerStats, bool, error)
	// Save stores st as st.Name's record.
	Save(ctx context.Context, st PlayerStats) error
}

// memRecords is Records in a map. Safe for concurrent use.
type memRecords struct {
	mu sync.Mutex
	m  map[string]PlayerStats
	// latency is how long each Load and Save waits first, as a database's
	// round trip would: a blocking call, as Go code makes one. The silo
	// runs hooks that block side by side, off their partitions
	// (docs/lifecycle.md, "Hooks that block").
	latency time.Duration
}

func newMemRecords() *memRecords { return &memRecords{m: make(map[string]PlayerStats)} }

// newSlowRecords is memRecords whose every Load and Save waits latency.
func newSlowRecords(latency time.Duration) *memRecords {
	r := newMemRecords()
	r.latency = latency
	return r
}

// wait is the store's round trip: latency, or less if ctx ends first.
func (r *memRecords) wait(ctx context.Context) error {
	if r.latency <= 0 {
		return nil
	}
	t := time.NewTimer(r.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (r *memRecords) Load(ctx context.Context, name string) (PlayerStats, bool, error) {
	if err := r.wait(ctx); err != nil {
		return PlayerStats{}, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.m[name]
	return st, ok, nil
}

func (r *memRecords) Save(ctx context.Context, st PlayerStats) error {
	if err := r.wait(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[st.Name] = st
	return nil
}

// totals returns how many records there are, and their wins and losses.
func (r *memRecords) totals() (players, wins, losses int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	players = len(r.m)
	for _, st := range r.m {
		wins += st.Wins
		losses += st.Losses
	}
	return players, wins, losses
}
