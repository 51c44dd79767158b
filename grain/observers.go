package grain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
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
type Observers struct {
	ids []ID
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
	if slices.Contains(o.ids, id) {
		return false, nil
	}
	o.ids = append(o.ids, id)
	return true, nil
}

// Unsubscribe removes id from the list, reporting whether it was there.
func (o *Observers) Unsubscribe(id ID) bool {
	if o == nil {
		return false
	}
	i := slices.Index(o.ids, id)
	if i < 0 {
		return false
	}
	o.ids = slices.Delete(o.ids, i, i+1)
	return true
}

// Len returns the number of subscribers.
func (o *Observers) Len() int {
	if o == nil {
		return 0
	}
	return len(o.ids)
}

// All yields the subscribers in the order they subscribed.
func (o *Observers) All() iter.Seq[ID] {
	if o == nil {
		return slices.Values([]ID(nil))
	}
	return slices.Values(o.ids)
}

// Notify tells msg to every subscriber, in the order they subscribed, with
// t — in a turn, the turn's Context.Silo() and ctx, so that each message
// carries the grain as its sender. A subscriber whose observer is closed is
// dropped. A failure to tell one subscriber (ErrOverloaded for an observer
// that reads too slowly, say) does not keep the others from being told: the
// failures come back joined, each naming its subscriber. Notify stops early
// only when ctx ends, returning ctx's error with the failures before it.
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
	var errs []error
	kept := o.ids[:0]
	for i, id := range o.ids {
		if err := ctx.Err(); err != nil {
			kept = append(kept, o.ids[i:]...)
			errs = append(errs, err)
			break
		}
		err := t.Tell(ctx, id, msg)
		if errors.Is(err, ErrObserverClosed) {
			continue
		}
		kept = append(kept, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("notify %v: %w", id, err))
		}
	}
	clear(o.ids[len(kept):]) // the dropped IDs' strings
	o.ids = kept
	return errors.Join(errs...)
}

// MarshalJSON writes the list as a JSON array of IDs in their text form,
// so that a grain that saves its state saves its subscribers with it. An
// observer's ID is saved too: reloaded, it is dropped at the first Notify
// if its observer has gone (as after a restart it has).
func (o Observers) MarshalJSON() ([]byte, error) {
	if o.ids == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(o.ids)
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
