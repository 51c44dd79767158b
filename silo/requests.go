package silo

import (
	"context"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// Deactivate asks the grain id to deactivate, ahead of the messages queued
// for it (a system message, as in Akka): once its current turn, if any, has
// finished, OnDeactivate runs, and the messages that were waiting go to a
// fresh activation. It returns at once; deactivating a grain that is not
// active does nothing. Errors are those of Tell for a bad id or a stopped
// silo.
func (s *Silo) Deactivate(ctx context.Context, id grain.ID) error {
	return s.request(ctx, id, opDeactivate)
}

// Stop stops the grain id ahead of the messages queued for it: they, and any
// that arrive before it is gone, become dead letters with reason stopped
// (asks among them fail with ErrGrainStopped); once its current turn, if
// any, has finished, OnDeactivate runs. The next message after that
// activates a fresh instance. It returns at once.
func (s *Silo) Stop(ctx context.Context, id grain.ID) error {
	return s.request(ctx, id, opStop)
}

// request sends a system message for id on its partition's control lane,
// which the owner reads before any user message.
func (s *Silo) request(ctx context.Context, id grain.ID, op ctlOp) error {
	p, h, err := s.admit(ctx, id, op)
	if err != nil {
		return err
	}
	p.q.PushControl(ctl{op: op, first: queues.Envelope{Target: id, Hash: h}})
	return nil
}
