package grain_test

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

func TestIDBasics(t *testing.T) {
	s := grain.NewID("player", "42")
	i := grain.NewIntID("player", 42)
	assert.NotEqual(t, s, i, "int and string keys are distinct identities")
	assert.NotEqual(t, s.Hash(), i.Hash())
	assert.Equal(t, "42", i.Key())
	k, ok := i.IntKey()
	assert.True(t, ok)
	assert.Equal(t, int64(42), k)
	_, ok = s.IntKey()
	assert.False(t, ok)
	assert.Equal(t, "player/42", s.String())
	assert.Equal(t, "player#42", i.String())
	assert.True(t, grain.ID{}.IsZero())
	for id, want := range map[grain.ID]bool{s: true, i: true, grain.NewIntID("player", 0): true, grain.NewID("player", ""): false, {}: false} {
		assert.Equal(t, want, id.HasKey(), "%#v", id)
	}
	assert.Equal(t, grain.NewID("a", "b"), grain.NewID("a", "b"), "comparable")
}

// Equal agrees with == on every pair: same and different kinds, string
// and int keys, an int key and its decimal string, the zero ID.
func TestIDEqualIsEquality(t *testing.T) {
	ids := []grain.ID{
		{},
		grain.NewID("player", "42"),
		grain.NewID("player", "42x"),
		grain.NewID("player", ""),
		grain.NewID("team", "42"),
		grain.NewIntID("player", 42),
		grain.NewIntID("player", 0),
		grain.NewIntID("team", 42),
		grain.NewIntID("", 0),
		grain.NewID("player", string([]byte("42"))), // equal, stored apart
	}
	for _, a := range ids {
		for _, b := range ids {
			assert.Equal(t, a == b, a.Equal(&b), "%#v and %#v", a, b)
		}
	}
	assert.True(t, ids[1].Equal(&ids[len(ids)-1]))
}

func TestIDValidate(t *testing.T) {
	require.NoError(t, grain.NewID("k", "x").Validate())
	require.NoError(t, grain.NewIntID("k", 0).Validate(), "an int key may be 0")
	require.ErrorIs(t, grain.NewID("", "x").Validate(), grain.ErrEmptyKind)
	require.ErrorIs(t, grain.NewID("k", "").Validate(), grain.ErrEmptyKey)
	require.ErrorIs(t, grain.NewID("k/1", "x").Validate(), grain.ErrInvalidKind)
	require.ErrorIs(t, grain.NewID("k#1", "x").Validate(), grain.ErrInvalidKind)
	var ie *grain.IDError
	require.ErrorAs(t, grain.NewID("k", "").Validate(), &ie)
}

// The partition mapping must never change between releases: these values
// follow the definition documented on Hash, computed here from its parts.
func TestHashIsStable(t *testing.T) {
	fold := func(a, b uint64) uint64 {
		const p1, p2, p3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
		x := a ^ b*p2
		x = bits.RotateLeft64(x, 31) * p1
		x ^= x >> 33
		x *= p2
		x ^= x >> 29
		x *= p3
		x ^= x >> 32
		return x
	}
	assert.Equal(t, grain.NewID("counter", "player-42").Hash(), grain.NewID("counter", "player-42").Hash())
	assert.NotEqual(t, grain.NewID("ab", "c").Hash(), grain.NewID("a", "bc").Hash(), "kind and key are separated")
	assert.NotEqual(t, grain.NewID("k", "7").Hash(), grain.NewIntID("k", 7).Hash(), "an int key is not its digits")
	assert.Equal(t, fold(^xxhash.Sum64String("counter"), xxhash.Sum64String("player-42")), grain.NewID("counter", "player-42").Hash())
	assert.Equal(t, fold(xxhash.Sum64String("k"), 7), grain.NewIntID("k", 7).Hash())
	assert.Equal(t, uint64(0x1128c278fab0012), grain.NewID("counter", "player-42").Hash(), "pinned")
	assert.Equal(t, uint64(0xf99cea875d6a89af), grain.NewIntID("counter", -3).Hash(), "pinned")
	for _, id := range []grain.ID{
		{}, grain.NewID("counter", "player-42"), grain.NewIntID("counter", -3), grain.NewIntID("k", 0), grain.NewID("k", ""),
	} {
		assert.Equal(t, id.Hash(), id.HashWithKind(grain.KindHash(id.Kind())), "%v: a kind's hash known", id)
	}
}

// For one kind, distinct int keys never share a hash.
func TestIntKeysOfAKindNeverCollide(t *testing.T) {
	seen := make(map[uint64]int64, 100000)
	for k := int64(-50000); k < 50000; k++ {
		h := grain.NewIntID("player", k).Hash()
		if prev, dup := seen[h]; dup {
			t.Fatalf("keys %d and %d share hash %#x", prev, k, h)
		}
		seen[h] = k
	}
}

func TestParseRoundTrip(t *testing.T) {
	for _, id := range []grain.ID{
		grain.NewID("counter", "player-42"),
		grain.NewID("k", "with/slash#and hash"),
		grain.NewIntID("k", -9),
		grain.NewIntID("k", 1<<62),
	} {
		got, err := grain.ParseID(id.String())
		require.NoError(t, err)
		assert.Equal(t, id, got)
		b, err := json.Marshal(map[string]grain.ID{"id": id})
		require.NoError(t, err)
		var back map[string]grain.ID
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, id, back["id"])
	}
	for _, bad := range []string{"", "nokey", "/x", "k/", "k#", "k#x", "k#99999999999999999999"} {
		_, err := grain.ParseID(bad)
		require.Error(t, err, bad)
	}
	_, err := grain.ParseID("k#x")
	require.ErrorIs(t, err, grain.ErrInvalidID)

	// A key that is not valid UTF-8 cannot travel as text: encoding/json
	// would replace its bytes and read back another grain's ID. Refused.
	for _, id := range []grain.ID{grain.NewID("k", "\xff\x00"), grain.NewID("k\xfe", "a")} {
		_, err = json.Marshal(map[string]grain.ID{"id": id})
		require.ErrorIs(t, err, grain.ErrInvalidID)
		var idErr *grain.IDError
		require.ErrorAs(t, err, &idErr)
	}
	// Nor does an ID that is not valid at all — its text would not parse
	// back: the error is Validate's, an *IDError naming what is wrong.
	for id, want := range map[grain.ID]error{
		grain.NewID("", "x"):     grain.ErrEmptyKind,
		grain.NewID("k", ""):     grain.ErrEmptyKey,
		grain.NewID("a/b", "c"):  grain.ErrInvalidKind,
		grain.NewIntID("a#b", 1): grain.ErrInvalidKind,
	} {
		_, err = json.Marshal(map[string]grain.ID{"id": id})
		require.ErrorIs(t, err, want, "%#v", id)
		_, err = id.MarshalText()
		require.ErrorIs(t, err, want, "%#v", id)
		var idErr *grain.IDError
		require.ErrorAs(t, err, &idErr)
	}
}

// The zero ID encodes as the empty text and reads back zero, as
// netip.Addr's zero value does: a struct whose ID is not set yet — a
// match's opponent before one is found — encodes, instead of failing the
// whole json.Marshal; omitzero leaves the field out. ParseID still refuses
// the empty string: it names no grain.
func TestTheZeroIDEncodesAsEmptyText(t *testing.T) {
	type match struct {
		Player   grain.ID `json:"player"`
		Opponent grain.ID `json:"opponent"`
		Next     grain.ID `json:"next,omitzero"`
	}
	in := match{Player: grain.NewID("player", "p1")}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"player":"player/p1","opponent":""}`, string(b))
	out := match{Opponent: grain.NewID("player", "stale")}
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)
	assert.True(t, out.Opponent.IsZero())

	text, err := grain.ID{}.MarshalText()
	require.NoError(t, err)
	assert.Empty(t, text)
	assert.Empty(t, grain.ID{}.String(), "as its text: not \"/\"")
	_, err = grain.ParseID("")
	require.ErrorIs(t, err, grain.ErrInvalidID)
}

// Compare sorts a listing of IDs by kind, then int keys before string keys,
// each by value; it is 0 exactly for equal IDs, and antisymmetric.
func TestCompareOrdersIDs(t *testing.T) {
	want := []grain.ID{
		grain.NewIntID("cart", -3), grain.NewIntID("cart", 2), grain.NewIntID("cart", 10),
		grain.NewID("cart", "10"), grain.NewID("cart", "2"), grain.NewID("cart", "b"),
		grain.NewIntID("player", 1), grain.NewID("player", "a"),
	}
	got := slices.Clone(want)
	rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	slices.SortFunc(got, grain.ID.Compare)
	assert.Equal(t, want, got)
	for _, a := range want {
		for _, b := range want {
			assert.Equal(t, a == b, a.Compare(b) == 0, "%v %v", a, b)
			assert.Equal(t, -a.Compare(b), b.Compare(a), "%v %v", a, b)
		}
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"counter/player-42", "k#12", "a/b/c", "#", "/", "k#-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := grain.ParseID(s)
		if err != nil {
			return
		}
		require.NoError(t, id.Validate())
		again, err := grain.ParseID(id.String())
		require.NoError(t, err)
		require.Equal(t, id, again)
	})
}

// %#v shows an identity as the call that makes it, not the struct's fields:
// what a failing test prints of a message that holds one.
func TestGoStringIsTheCallThatMakesTheID(t *testing.T) {
	type msg struct{ From grain.ID }
	assert.Equal(t, `grain.NewID("player", "alice")`, fmt.Sprintf("%#v", grain.NewID("player", "alice")))
	assert.Equal(t, `grain.NewIntID("device", -42)`, fmt.Sprintf("%#v", grain.NewIntID("device", -42)))
	assert.Equal(t, `grain.ID{}`, fmt.Sprintf("%#v", grain.ID{}))
	assert.Equal(t, `grain.NewID("a\"b", "k/\x00")`, fmt.Sprintf("%#v", grain.NewID(`a"b`, "k/\x00")))
	assert.Equal(t, `grain_test.msg{From:grain.NewID("cart", "u-17")}`, fmt.Sprintf("%#v", msg{From: grain.NewID("cart", "u-17")}))
}
