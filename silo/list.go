package silo

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/grain"
)

// ActiveGrains returns the identities of the grains of kind in the silo
// now — activating, active, restarting after a failure or deactivating —
// in no particular order (slices.SortFunc(ids, grain.ID.Compare) sorts
// them); every kind's when kind is "". It is a snapshot:
// a grain may activate or go the moment after its partition was read. Each
// partition's owner reads its own directory, between turns, so it costs no
// lock on the message path, and ActiveGrains waits for them all, or until
// ctx ends. An owner holds its other grains only for one pass over its
// directory's array (4–12 ms for 500,000 grains); the identities are read
// on the caller's goroutine. Called from a turn, it lets the turn's
// partition go on with other grains meanwhile, as a call does.
//
// This is Orleans' management GetActiveGrains and Akka's shard region
// state: for operators, dashboards and broadcasts ("tell every player on
// line"), not for finding a grain — an ID is already its address.
//
// It returns grain.ErrUnknownKind for a kind not registered, ErrSiloClosed
// before Start and after the silo stopped (a partition that stopped during
// a Shutdown counts as holding none), and ctx's error if it ends first.
func (s *Silo) ActiveGrains(ctx context.Context, kind string) ([]grain.ID, error) {
	if err := s.made(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, grain.ErrNilContext
	}
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	switch s.state.Load() {
	case stateRunning, stateStopping:
	case stateNew:
		return nil, ErrNotStarted
	default:
		return nil, grain.ErrSiloClosed
	}
	if kind != "" {
		if _, ok := s.kinds[kind]; !ok { // kinds are fixed once started
			return nil, fmt.Errorf("%w: %q", grain.ErrUnknownKind, kind)
		}
	}
	replies := make([]chan []*act, len(s.parts))
	for i, p := range s.parts {
		replies[i] = make(chan []*act, 1) // the owner never waits on it
		p.q.PushControl(ctl{op: opList, list: replies[i]})
	}
	if ti := turnFrom(ctx); ti != nil {
		// Called from a turn, whose partition's owner is this goroutine:
		// hand the partition off now, as a call does, rather than wait
		// for the watchdog to (it answers the request too).
		ti.w.detach()
	}
	var ids []grain.ID
	add := func(acts []*act) {
		// Read here, not by the owner: an activation's identity and kind
		// never change once it is in the directory (the reply orders this
		// goroutine's reads after the owner's writes), and reading them is
		// a cache miss each — half a second for a million grains, which
		// the owner once spent holding its partition's every grain.
		for _, a := range acts {
			if kind == "" || a.k.name == kind {
				ids = append(ids, a.ID)
			}
		}
	}
	for i, p := range s.parts {
		select {
		case got := <-replies[i]:
			add(got)
		case <-p.done: // stopped: it answers nothing more, and holds no grain
			select {
			case got := <-replies[i]: // it answered before it stopped
				add(got)
			default:
			}
		case <-ctx.Done():
			return nil, s.ctxErr(ctx)
		}
	}
	return s.dedupeWorkers(ids), nil
}

// list answers an ActiveGrains request with the partition's activations:
// the directory's slots, read in one pass (directory.Table.AppendValues),
// not the activations, whose identities the caller reads (ActiveGrains).
// Owner only.
func (p *partition) list(reply chan<- []*act) {
	reply <- p.dir.AppendValues(make([]*act, 0, p.dir.Len()))
}
