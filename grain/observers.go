package grain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/granary-go/granary/internal/ctxerr"
)

// ObserverKind is the kind of every observer's ID. An observer (see
// silo.Silo.NewObserver) is an address outside any grain — a client's
// connection, a test — that grains send to with Tell, as to a grain, and
// that receives what they send (Orleans' grain observers). No grain kind may
// be registered under this name.
const ObserverKind = "granary.observer"

// IsObserver reports whether id addresses an observer rather than a grain.
func (id ID) IsObserver() bool { return id.kind == ObserverKind }

// Observers is a grain's list of subscribers — observers, or other grains —
// that Notify tells all at once (Orleans' ObserverManager). It belongs in a
// grain's state: it is not safe for concurrent use, and a grain's turns
// need no lock for it. The zero value is an empty list, ready to use; a nil
// *Observers is an empty list that cannot be added to.
//
// An observer that has been closed is dropped from the list the first time
// Notify finds it so (its Tell fails with ErrObserverClosed): a client that
// went away without unsubscribing costs one failed send, not a subscription
// for ever.
//
// Subscribe and Unsubscribe take constant time, however long the list (a
// room with a hundred thousand watchers, say); Notify and All take time in
// proportion to it.
type Observers struct {
	// ids in the order they subscribed; an Unsubscribe leaves a hole (the
	// zero ID), closed up once holes are half the slice and at Notify.
	ids   []ID
	holes int
	// pos indexes ids once the list has grown past smallList: below, a
	// scan is as quick and a grain with a few watchers keeps no map.
	pos map[ID]int
}

// smallList is the longest list kept without an index.
const smallList = 8

// find returns id's place in ids, or -1.
func (o *Observers) find(id ID) int {
	if o.pos == nil {
		return slices.Index(o.ids, id)
	}
	if i, ok := o.pos[id]; ok {
		return i
	}
	return -1
}

// reindex makes pos anew from ids, if the list is long enough for one.
func (o *Observers) reindex() {
	if len(o.ids)-o.holes <= smallList {
		o.pos = nil
		return
	}
	o.pos = make(map[ID]int, len(o.ids))
	for i, id := range o.ids {
		if !id.IsZero() {
			o.pos[id] = i
		}
	}
}

// compact closes the holes, keeping the order, and moves the index with
// the IDs (made or dropped only when the list crosses smallList).
func (o *Observers) compact() {
	kept := o.ids[:0]
	for _, id := range o.ids {
		if !id.IsZero() {
			if o.pos != nil {
				o.pos[id] = len(kept)
			}
			kept = append(kept, id)
		}
	}
	clear(o.ids[len(kept):]) // the dropped IDs' strings
	o.ids, o.holes = kept, 0
	if (o.pos == nil) != (len(kept) <= smallList) {
		o.reindex()
	}
}

// Subscribe adds id to the list; it reports false, changing nothing, if id
// is there already. An invalid id is refused with its *IDError.
func (o *Observers) Subscribe(id ID) (bool, error) {
	if o == nil {
		return false, ErrNilObservers
	}
	if err := id.Validate(); err != nil {
		return false, err
	}
	if o.find(id) >= 0 {
		return false, nil
	}
	o.ids = append(o.ids, id)
	switch {
	case o.pos != nil:
		o.pos[id] = len(o.ids) - 1
	case len(o.ids)-o.holes > smallList:
		o.reindex()
	}
	return true, nil
}

// Unsubscribe removes id from the list, reporting whether it was there.
func (o *Observers) Unsubscribe(id ID) bool {
	if o == nil {
		return false
	}
	i := o.find(id)
	if i < 0 {
		return false
	}
	o.ids[i] = ID{}
	o.holes++
	if o.pos != nil {
		delete(o.pos, id)
	}
	if o.holes > len(o.ids)/2 {
		o.compact()
	}
	return true
}

// Len returns the number of subscribers.
func (o *Observers) Len() int {
	if o == nil {
		return 0
	}
	return len(o.ids) - o.holes
}

// All yields the subscribers in the order they subscribed.
func (o *Observers) All() iter.Seq[ID] {
	return func(yield func(ID) bool) {
		if o == nil {
			return
		}
		for _, id := range o.ids {
			if !id.IsZero() && !yield(id) {
				return
			}
		}
	}
}

// Notify tells msg to every subscriber, in the order they subscribed, with
// t — in a turn, the turn's Context.Silo() and ctx, so that each message
// carries the grain as its sender. A subscriber whose observer is closed is
// dropped. A failure to tell one subscriber (ErrOverloaded for an observer
// that reads too slowly, say) does not keep the others from being told: the
// failures come back as one *NotifyError, which counts them and names the
// first few, each with its subscriber — a thousand slow clients make an
// error of a few lines. Notify stops early only when ctx ends, returning a
// *NotifyError that holds ctx's error (errors.Is matches it) and the
// failures before it.
// A nil ctx or Teller is refused (ErrNilContext, ErrNilTeller) before
// anything is sent.
func (o *Observers) Notify(ctx context.Context, t Teller, msg any) error {
	switch {
	case ctx == nil:
		return ErrNilContext
	case t == nil:
		return ErrNilTeller
	case o == nil:
		return nil
	}
	var nerr *NotifyError // made at the first failure: most Notifies have none
	dropped := 0
	for i, id := range o.ids {
		if id.IsZero() {
			continue
		}
		if ctx.Err() != nil {
			if nerr == nil {
				nerr = &NotifyError{}
			}
			nerr.Stopped = ctxerr.Of(ctx) // its cause too, if it was given one
			break
		}
		err := t.Tell(ctx, id, msg)
		if errors.Is(err, ErrObserverClosed) {
			o.ids[i] = ID{}
			if o.pos != nil {
				delete(o.pos, id)
			}
			dropped++
			continue
		}
		if err != nil {
			if nerr == nil {
				nerr = &NotifyError{}
			}
			nerr.Failed++
			if len(nerr.First) < MaxNotifyFailures {
				nerr.First = append(nerr.First, NotifyFailure{ID: id, Err: err})
			}
		}
	}
	if dropped > 0 || o.holes > 0 {
		o.holes += dropped
		o.compact()
	}
	if nerr == nil {
		return nil
	}
	return nerr
}

// MarshalJSON writes the list as a JSON array of IDs in their text form,
// so that a grain that saves its state saves its subscribers with it. An
// observer's ID is saved too: reloaded, it is dropped at the first Notify
// if its observer has gone (as after a restart it has).
func (o Observers) MarshalJSON() ([]byte, error) {
	ids := slices.Collect(o.All())
	if ids == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(ids)
}

// UnmarshalJSON reads what MarshalJSON wrote, replacing the list. Invalid
// IDs and duplicates are refused (an *IDError, or ErrInvalidID), leaving
// the list as it was.
func (o *Observers) UnmarshalJSON(b []byte) error {
	if o == nil {
		return ErrNilObservers
	}
	var ids []ID
	if err := json.Unmarshal(b, &ids); err != nil {
		return err
	}
	var fresh Observers
	for _, id := range ids {
		added, err := fresh.Subscribe(id)
		if err != nil {
			return err
		}
		if !added {
			return fmt.Errorf("%w: %v listed twice", ErrInvalidID, id)
		}
	}
	*o = fresh
	return nil
}
