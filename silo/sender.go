package silo

import (
	"unsafe"

	"github.com/granary-go/granary/idle"
	"github.com/granary-go/granary/queues"
)

// senderMeta returns the metadata naming a as a message's sender, made at
// a's first send from a turn and kept in its record, so that a grain
// sending turn after turn — a conversation, a grain that forwards, a
// fan-out — names itself without allocating its identity for every
// message. It is shared by every envelope it goes in, so it never changes
// once made. (Before, a partition kept the metadata of its 64 most recent
// senders, direct-mapped on their records' addresses: a partition with more
// senders than that allocated for most of their tells.)
//
// Safe for concurrent use: a turn's goroutines may send at once; two that
// race both make one, and the first stored stays.
func (a *act) senderMeta() *queues.Meta {
	if m := a.sender.Load(); m != nil {
		return m
	}
	m := &queues.Meta{Sender: a.ID}
	if !a.sender.CompareAndSwap(nil, m) {
		return a.sender.Load()
	}
	return m
}

// actOf returns the activation record whose idle-wheel entry e is. The
// entry is a field of the record, so its address says where the record is:
// an entry that pointed back at its record took 8 of the record's 128
// bytes, which now keep its sender metadata instead.
func actOf(e *idle.Entry[struct{}]) *act {
	return (*act)(unsafe.Add(unsafe.Pointer(e), -int(unsafe.Offsetof(act{}.idle))))
}
