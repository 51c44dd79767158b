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
// active does nothing. A stateless worker's identity (WithStatelessWorker)
// deactivates every one of its activations. Errors are those of Tell for a
// bad id or a stopped silo.
func (s *Silo) Deactivate(ctx context.Context, id grain.ID) error {
	return s.request(ctx, id, opDeactivate)
}

// Stop stops the grain id ahead of the messages queued for it: every message
// sent to it before Stop — waiting in its mailbox or still in its
// partition's queue — becomes a dead letter with reason stopped (asks among
// them fail with ErrGrainStopped); once its current turn, if any, has
// finished, OnDeactivate runs. Messages sent after Stop wait for the grain
// to be gone and go to a fresh instance. It returns at once. A stateless
// worker's identity stops every one of its activations.
//
// The current turn finishes with what it waits for: with Deactivate as with
// Stop, a call back into the grain on the call chain of a turn that waits
// (call-chain reentrancy, or a reentrant kind) runs on the instance waiting
// for it. A reentrant grain that is busy when Deactivate comes deactivates
// once its last turn ends, letting messages in meanwhile, as
// grain.Context.DeactivateOnIdle does. Called from OnActivate, either lets
// the message whose activation it is run first: an activation begins its
// first message's turn (a grain that finds in OnActivate it should not
// exist returns an error instead, which fails that message too).
func (s *Silo) Stop(ctx context.Context, id grain.ID) error {
	return s.request(ctx, id, opStop)
}

// request sends a system message for id on its partition's control lane,
// which the owner reads before any user message.
func (s *Silo) request(ctx context.Context, id grain.ID, op ctlOp) error {
	p, k, h, err := s.admit(ctx, id, op)
	if err != nil {
		return err
	}
	mk := func(ahead int) ctl {
		return ctl{op: op, first: queues.Envelope{Target: id, Hash: h}, ahead: ahead}
	}
	if k.workers > 1 { // every activation of a stateless worker
		base := s.locator.LocateHash(h).Partition
		for i := range k.workers {
			s.workerPart(base, i).q.PushControlAt(mk)
		}
		return nil
	}
	p.q.PushControlAt(mk)
	return nil
}
