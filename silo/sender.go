package silo

import (
	"sync/atomic"
	"unsafe"

	"github.com/granary-go/granary/queues"
)

// senderCache keeps the sender metadata (queues.Meta) of the grains of a
// partition that sent messages lately, so that a grain sending turn after
// turn — a conversation, a grain that forwards, a fan-out — names itself
// without allocating its identity for every message. It is direct-mapped on
// the address of the sending activation and checked by identity, so a
// collision or a grain reactivated at another address costs an allocation,
// never a wrong sender. It holds identities only, never an activation: a
// deactivated grain's state is not kept alive by it.
//
// Safe for concurrent use: a turn's goroutines, and the turns of a
// partition that were handed off, may send at once.
type senderCache [senderSlots]atomic.Pointer[queues.Meta]

// senderSlots: a partition's recent senders are few; 64 slots are half a
// kilobyte per partition.
const senderSlots = 64

// meta returns metadata naming a as a message's sender. It is shared by
// every envelope it goes in, so it never changes once made.
func (c *senderCache) meta(a *act) *queues.Meta {
	// Activation records are 128 bytes: the low bits of their addresses
	// say nothing.
	u := uintptr(unsafe.Pointer(a)) >> 7
	slot := &c[(u^u>>6)%senderSlots]
	if m := slot.Load(); m != nil && m.Sender == a.ID {
		return m
	}
	m := &queues.Meta{Sender: a.ID}
	slot.Store(m)
	return m
}
