package grain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// fakeTeller records tells and fails those to the IDs in fail.
type fakeTeller struct {
	told []grain.ID
	fail map[grain.ID]error
}

func (f *fakeTeller) Tell(_ context.Context, id grain.ID, _ any) error {
	f.told = append(f.told, id)
	return f.fail[id]
}

func TestObserversSubscribeAndUnsubscribe(t *testing.T) {
	var o grain.Observers
	a, b := grain.NewID("player", "a"), grain.NewID(grain.ObserverKind, "x.1")
	assert.True(t, b.IsObserver())
	assert.False(t, a.IsObserver())

	for _, id := range []grain.ID{a, b} {
		added, err := o.Subscribe(id)
		require.NoError(t, err)
		assert.True(t, added)
	}
	added, err := o.Subscribe(a)
	require.NoError(t, err)
	assert.False(t, added, "already there")
	_, err = o.Subscribe(grain.ID{})
	var ie *grain.IDError
	require.ErrorAs(t, err, &ie)
	_, err = o.Subscribe(grain.NewID("player", ""))
	require.ErrorIs(t, err, grain.ErrEmptyKey)
	assert.Equal(t, 2, o.Len())
	assert.Equal(t, []grain.ID{a, b}, slices.Collect(o.All()))
	var first []grain.ID
	for id := range o.All() { // a loop that breaks stops the iteration
		first = append(first, id)
		break
	}
	assert.Equal(t, []grain.ID{a}, first)

	assert.True(t, o.Unsubscribe(a))
	assert.False(t, o.Unsubscribe(a))
	assert.Equal(t, []grain.ID{b}, slices.Collect(o.All()))
}

// Notify tells everyone in order, drops the closed observers, and reports
// the other failures without stopping at them.
func TestObserversNotify(t *testing.T) {
	ids := make([]grain.ID, 5)
	var o grain.Observers
	for i := range ids {
		ids[i] = grain.NewID(grain.ObserverKind, fmt.Sprint(i))
		_, err := o.Subscribe(ids[i])
		require.NoError(t, err)
	}
	f := &fakeTeller{fail: map[grain.ID]error{
		ids[1]: fmt.Errorf("%w: gone", grain.ErrObserverClosed),
		ids[2]: grain.ErrOverloaded,
		ids[4]: fmt.Errorf("%w: gone", grain.ErrObserverClosed),
	}}
	err := o.Notify(context.Background(), f, "hi")
	assert.Equal(t, ids, f.told)
	require.ErrorIs(t, err, grain.ErrOverloaded)
	assert.NotErrorIs(t, err, grain.ErrObserverClosed, "a closed observer is dropped, not a failure")
	assert.Contains(t, err.Error(), ids[2].String())
	assert.Equal(t, []grain.ID{ids[0], ids[2], ids[3]}, slices.Collect(o.All()))

	f.told, f.fail = nil, nil
	require.NoError(t, o.Notify(context.Background(), f, "again"))
	assert.Equal(t, []grain.ID{ids[0], ids[2], ids[3]}, f.told)

	var empty grain.Observers
	require.NoError(t, empty.Notify(context.Background(), f, "no one"))
}

// A ctx that ends stops Notify, keeping everyone not yet told.
func TestObserversNotifyStopsWithItsContext(t *testing.T) {
	var o grain.Observers
	ids := []grain.ID{grain.NewID("a", "1"), grain.NewID("a", "2"), grain.NewID("a", "3")}
	for _, id := range ids {
		_, err := o.Subscribe(id)
		require.NoError(t, err)
	}
	// Ended with a cause, the error says it too (internal/ctxerr).
	left := errors.New("room closed")
	ctx, cancel := context.WithCancelCause(context.Background())
	f := &cancellingTeller{after: 1, cancel: func() { cancel(left) }, closed: ids[0]}
	err := o.Notify(ctx, f, "hi")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, left)
	var ne *grain.NotifyError
	require.ErrorAs(t, err, &ne)
	assert.Zero(t, ne.Failed, "the closed observer dropped, not failed")
	assert.Equal(t, "granary: notify: stopped: context canceled: room closed", err.Error())
	assert.Equal(t, []grain.ID{ids[0]}, f.told)
	assert.Equal(t, []grain.ID{ids[1], ids[2]}, slices.Collect(o.All()), "the closed one dropped, the rest kept")
}

// cancellingTeller cancels after `after` tells; closed's observer is closed.
type cancellingTeller struct {
	after  int
	cancel context.CancelFunc
	closed grain.ID
	told   []grain.ID
}

func (c *cancellingTeller) Tell(_ context.Context, id grain.ID, _ any) error {
	c.told = append(c.told, id)
	if len(c.told) == c.after {
		c.cancel()
	}
	if id == c.closed {
		return errors.Join(grain.ErrObserverClosed)
	}
	return nil
}

// Bad input is refused with a typed error, never a panic.
func TestObserversBadInput(t *testing.T) {
	var o grain.Observers
	_, err := o.Subscribe(grain.NewID("a", "1"))
	require.NoError(t, err)
	f := &fakeTeller{}
	require.ErrorIs(t, o.Notify(context.Background(), nil, "hi"), grain.ErrNilTeller)
	//lint:ignore SA1012 a nil ctx is the bad input under test
	require.ErrorIs(t, o.Notify(nil, f, "hi"), grain.ErrNilContext)
	assert.Empty(t, f.told)

	var none *grain.Observers
	assert.Zero(t, none.Len())
	assert.Empty(t, slices.Collect(none.All()))
	assert.False(t, none.Unsubscribe(grain.NewID("a", "1")))
	require.NoError(t, none.Notify(context.Background(), f, "hi"))
	_, err = none.Subscribe(grain.NewID("a", "1"))
	require.ErrorIs(t, err, grain.ErrNilObservers)
}

// A list saves and loads as JSON, with the grain's state.
func TestObserversJSON(t *testing.T) {
	type state struct {
		Name string
		Subs grain.Observers
	}
	var st state
	st.Name = "room"
	ids := []grain.ID{grain.NewID("player", "a"), grain.NewIntID("player", 7), grain.NewID(grain.ObserverKind, "local.x.1")}
	for _, id := range ids {
		_, err := st.Subs.Subscribe(id)
		require.NoError(t, err)
	}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	assert.JSONEq(t, `{"Name":"room","Subs":["player/a","player#7","granary.observer/local.x.1"]}`, string(b))

	var back state
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, ids, slices.Collect(back.Subs.All()))

	var empty state
	b, err = json.Marshal(empty)
	require.NoError(t, err)
	assert.JSONEq(t, `{"Name":"","Subs":[]}`, string(b))

	keep := back.Subs
	for _, bad := range []string{`["player/a","player/a"]`, `["nokind"]`, `["player/"]`, `[1]`, `{}`, `"x"`} {
		require.Error(t, back.Subs.UnmarshalJSON([]byte(bad)), bad)
		assert.Equal(t, slices.Collect(keep.All()), slices.Collect(back.Subs.All()), "unchanged by %s", bad)
	}
	var none *grain.Observers
	require.ErrorIs(t, none.UnmarshalJSON([]byte(`[]`)), grain.ErrNilObservers)
}

// Whatever bytes it is given, UnmarshalJSON returns an error or a list
// that encodes back to an equal list.
func FuzzObserversUnmarshalJSON(f *testing.F) {
	for _, seed := range []string{`[]`, `["player/a","player#7"]`, `["a/b","a/b"]`, `["#1"]`, `null`, `[""]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var o grain.Observers
		if err := o.UnmarshalJSON(b); err != nil {
			return
		}
		out, err := json.Marshal(o)
		require.NoError(t, err)
		var again grain.Observers
		require.NoError(t, again.UnmarshalJSON(out))
		assert.Equal(t, slices.Collect(o.All()), slices.Collect(again.All()))
	})
}

// A long list keeps its order and its set through subscriptions,
// unsubscriptions and drops, as a short one does.
func TestObserversLongList(t *testing.T) {
	var o grain.Observers
	var want []grain.ID
	id := func(i int) grain.ID { return grain.NewIntID("w", int64(i)) }
	for i := range 1000 {
		added, err := o.Subscribe(id(i))
		require.NoError(t, err)
		require.True(t, added)
		want = append(want, id(i))
	}
	for i := 0; i < 1000; i += 3 {
		require.True(t, o.Unsubscribe(id(i)))
		require.False(t, o.Unsubscribe(id(i)))
	}
	want = slices.DeleteFunc(want, func(x grain.ID) bool { k, _ := x.IntKey(); return k%3 == 0 })
	require.Equal(t, len(want), o.Len())
	require.Equal(t, want, slices.Collect(o.All()))
	added, err := o.Subscribe(id(3)) // back, at the end
	require.NoError(t, err)
	require.True(t, added)
	added, _ = o.Subscribe(id(4))
	require.False(t, added, "still there")
	want = append(want, id(3))

	// Notify drops those whose observer is closed, in one pass.
	closed := map[grain.ID]error{}
	for _, x := range want {
		if k, _ := x.IntKey(); k%5 == 0 {
			closed[x] = grain.ErrObserverClosed
		}
	}
	f := &fakeTeller{fail: closed}
	require.NoError(t, o.Notify(context.Background(), f, "hi"))
	assert.Equal(t, want, f.told, "everyone told, in order")
	want = slices.DeleteFunc(want, func(x grain.ID) bool { _, c := closed[x]; return c })
	assert.Equal(t, want, slices.Collect(o.All()))
	assert.Equal(t, len(want), o.Len())
	for _, x := range want { // and the set agrees with the order
		added, err := o.Subscribe(x)
		require.NoError(t, err)
		require.False(t, added, "%v", x)
	}
	for _, x := range want {
		require.True(t, o.Unsubscribe(x), "%v", x)
	}
	assert.Zero(t, o.Len())
	assert.Empty(t, slices.Collect(o.All()))
}

// Subscribe and Unsubscribe take constant time: compare the ns/op at the
// two sizes.
func BenchmarkObserversChurn(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var o grain.Observers
			for i := range n {
				_, _ = o.Subscribe(grain.NewIntID("w", int64(i)))
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := grain.NewIntID("w", int64(i%n))
				o.Unsubscribe(id)
				_, _ = o.Subscribe(id)
			}
		})
	}
}

// A thousand failures make one error of a few lines: counted, the first
// few named, errors.Is and errors.As still matching them.
func TestObserversNotifyCountsManyFailuresInOneError(t *testing.T) {
	var o grain.Observers
	f := &fakeTeller{fail: map[grain.ID]error{}}
	for i := range 1000 {
		id := grain.NewID(grain.ObserverKind, fmt.Sprint("slow.", i))
		_, err := o.Subscribe(id)
		require.NoError(t, err)
		if i%2 == 1 {
			f.fail[id] = fmt.Errorf("%w: observer %v, its buffer full", grain.ErrOverloaded, id)
		}
	}
	err := o.Notify(context.Background(), f, "hi")
	assert.Len(t, f.told, 1000, "every subscriber told, the failures notwithstanding")
	var ne *grain.NotifyError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, 500, ne.Failed)
	require.Len(t, ne.First, grain.MaxNotifyFailures)
	assert.Equal(t, grain.NewID(grain.ObserverKind, "slow.1"), ne.First[0].ID, "in the order subscribed")
	assert.Equal(t, grain.NewID(grain.ObserverKind, "slow.15"), ne.First[7].ID)
	require.ErrorIs(t, err, grain.ErrOverloaded)
	assert.NoError(t, ne.Stopped)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "granary: notify: 500 subscribers not told: granary.observer/slow.1: granary: grain overloaded"), msg)
	assert.True(t, strings.HasSuffix(msg, " (and 492 more)"), msg)
	assert.Less(t, len(msg), 1000, "a few lines, not a line a failure")
	assert.Equal(t, 1000, o.Len(), "an overloaded observer stays subscribed")
}

// One failure reads as one.
func TestANotifyErrorOfOneFailure(t *testing.T) {
	id := grain.NewID("player", "a")
	err := &grain.NotifyError{Failed: 1, First: []grain.NotifyFailure{{ID: id, Err: grain.ErrUnknownKind}}}
	assert.Equal(t, "granary: notify: 1 subscriber not told: player/a: granary: unknown grain kind", err.Error())
	stopped := &grain.NotifyError{Stopped: context.Canceled}
	assert.Equal(t, "granary: notify: stopped: context canceled", stopped.Error())
	assert.ErrorIs(t, stopped, context.Canceled)
}

// The Func adapters call their function.
func TestCallerAndTellerFuncs(t *testing.T) {
	id := grain.NewID("a", "1")
	var told grain.ID
	tf := grain.TellerFunc(func(_ context.Context, to grain.ID, _ any) error { told = to; return grain.ErrOverloaded })
	require.ErrorIs(t, tf.Tell(context.Background(), id, "hi"), grain.ErrOverloaded)
	assert.Equal(t, id, told)
	cf := grain.CallerFunc(func(_ context.Context, to grain.ID, msg any) (any, error) { return to.Key() + ":" + msg.(string), nil })
	r, err := cf.Ask(context.Background(), id, "hi")
	require.NoError(t, err)
	assert.Equal(t, "1:hi", r)
}
