package silo

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/grain"
)

// ActiveGrains returns the identities of the grains of kind in the silo
// now — activating, active, restarting after a failure or deactivating —
// in no particular order; every kind's when kind is "". It is a snapshot:
// a grain may activate or go the moment after its partition was read. Each
// partition's owner reads its own directory, between turns, so it costs no
// lock on the message path, and ActiveGrains waits for them all, or until
// ctx ends. Called from a turn, it lets the turn's partition go on with
// other grains meanwhile, as a call does.
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
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	switch s.state.Load() {
	case stateRunning, stateStopping:
	case stateNew:
		return nil, fmt.Errorf("%w: not started", grain.ErrSiloClosed)
	default:
		return nil, grain.ErrSiloClosed
	}
	if kind != "" {
		if _, ok := s.kinds[kind]; !ok { // kinds are fixed once started
			return nil, fmt.Errorf("%w: %q", grain.ErrUnknownKind, kind)
		}
	}
	replies := make([]chan []grain.ID, len(s.parts))
	for i, p := range s.parts {
		replies[i] = make(chan []grain.ID, 1) // the owner never waits on it
		p.q.PushControl(ctl{op: opList, list: &listing{kind: kind, reply: replies[i]}})
	}
	if ti := turnFrom(ctx); ti != nil {
		// Called from a turn, whose partition's owner is this goroutine:
		// hand the partition off now, as a call does, rather than wait
		// for the watchdog to (it answers the request too).
		ti.w.detach()
	}
	var ids []grain.ID
	for i, p := range s.parts {
		select {
		case got := <-replies[i]:
			ids = append(ids, got...)
		case <-p.done: // stopped: it answers nothing more, and holds no grain
			select {
			case got := <-replies[i]: // it answered before it stopped
				ids = append(ids, got...)
			default:
			}
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	return s.dedupeWorkers(ids), nil
}

// listing is an ActiveGrains request to one partition.
type listing struct {
	kind  string // "" for every kind
	reply chan<- []grain.ID
}

// list answers an ActiveGrains request from the directory. Owner only.
func (p *partition) list(l *listing) {
	var ids []grain.ID
	p.dir.All(func(id grain.ID, _ *act) bool {
		if l.kind == "" || id.Kind() == l.kind {
			ids = append(ids, id)
		}
		return true
	})
	l.reply <- ids
}
