package grain

import (
	"cmp"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// ID is a grain's identity: a kind (the grain's type, as registered with the
// silo) and a key. Keys are strings or int64s; an int key and the string of the
// same digits are different identities, as in Orleans.
//
// ID is a comparable value: use it as a map key, compare it with ==. The zero
// ID is invalid. Build IDs with NewID or NewIntID.
type ID struct {
	kind  string // first: the silo reads it in place (TestTheKindIsTheIDsFirstField)
	key   string
	ikey  int64
	isInt bool
}

// Characters a kind may not contain, so that ID.String can be parsed back.
const kindSeparators = "/#"

// NewID returns the identity of the grain of the given kind with a string key.
// It creates nothing: an ID is only a reference. Invalid input is reported
// when the ID is used (see Validate).
func NewID(kind, key string) ID { return ID{kind: kind, key: key} }

// NewIntID returns the identity of the grain of the given kind with an int64
// key.
func NewIntID(kind string, key int64) ID { return ID{kind: kind, ikey: key, isInt: true} }

// Kind returns the grain kind.
func (id ID) Kind() string { return id.kind }

// Key returns the key as a string: the string key, or the decimal form of an
// int key.
func (id ID) Key() string {
	if id.isInt {
		return strconv.FormatInt(id.ikey, 10)
	}
	return id.key
}

// IntKey returns the int key and true, or 0 and false for a string key.
func (id ID) IntKey() (int64, bool) { return id.ikey, id.isInt }

// HasKey reports whether id has a key: an int key, or a string key that is
// not empty. (A pointer receiver: on a send's path, an accessor of the ID
// by value copied all 48 bytes for the one field.)
func (id *ID) HasKey() bool { return id.isInt || id.key != "" }

// Compare orders IDs for a listing — ActiveGrains' identities, which come
// in no order — returning -1, 0 or +1 as id sorts before, with or after o:
// by kind, then int keys before string keys, int keys by value and string
// keys by their bytes. slices.SortFunc(ids, grain.ID.Compare) sorts them.
// It is 0 exactly when id == o.
func (id ID) Compare(o ID) int {
	if c := strings.Compare(id.kind, o.kind); c != 0 {
		return c
	}
	switch {
	case id.isInt && o.isInt:
		return cmp.Compare(id.ikey, o.ikey)
	case id.isInt != o.isInt:
		if id.isInt {
			return -1
		}
		return 1
	}
	return strings.Compare(id.key, o.key)
}

// Equal reports whether *id and *o are the same identity, as *id == *o
// does. It is for a hot path: it inlines, where == calls a generated
// function, and it compares first the fields that differ most often.
func (id *ID) Equal(o *ID) bool {
	return id.ikey == o.ikey && id.isInt == o.isInt && id.key == o.key && id.kind == o.kind
}

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// Validate reports why id cannot address a grain: ErrEmptyKind, ErrInvalidKind
// or ErrEmptyKey, wrapped in an *IDError. It returns nil for a valid ID.
func (id ID) Validate() error {
	switch {
	case id.kind == "":
		return &IDError{ID: id, Err: ErrEmptyKind}
	case strings.ContainsAny(id.kind, kindSeparators):
		return &IDError{ID: id, Err: ErrInvalidKind}
	case !id.isInt && id.key == "":
		return &IDError{ID: id, Err: ErrEmptyKey}
	}
	return nil
}

// String returns "kind/key" for a string key and "kind#123" for an int key.
// ParseID reverses it. The zero ID's is empty, as its text is (MarshalText):
// a notification or a dead letter from outside any grain has no sender to
// print, rather than "/".
func (id ID) String() string {
	if id == (ID{}) {
		return ""
	}
	if id.isInt {
		return id.kind + "#" + strconv.FormatInt(id.ikey, 10)
	}
	return id.kind + "/" + id.key
}

// GoString returns the Go expression that makes id — grain.NewID("player",
// "alice"), grain.NewIntID("device", 42), grain.ID{} — so that %#v, and a
// test's failure that prints a message holding an ID, shows the identity
// rather than the struct's unexported fields.
func (id ID) GoString() string {
	switch {
	case id == (ID{}):
		return "grain.ID{}"
	case id.isInt:
		return "grain.NewIntID(" + strconv.Quote(id.kind) + ", " + strconv.FormatInt(id.ikey, 10) + ")"
	}
	return "grain.NewID(" + strconv.Quote(id.kind) + ", " + strconv.Quote(id.key) + ")"
}

// ParseID parses the form written by ID.String. The result is validated.
func ParseID(s string) (ID, error) {
	i := strings.IndexAny(s, kindSeparators)
	if i < 0 {
		return ID{}, &IDError{Err: fmt.Errorf("%w: %q has no '/' or '#'", ErrInvalidID, s)}
	}
	kind, rest := s[:i], s[i+1:]
	var id ID
	if s[i] == '#' {
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return ID{}, &IDError{Err: fmt.Errorf("%w: int key %q: %v", ErrInvalidID, rest, err)}
		}
		id = NewIntID(kind, n)
	} else {
		id = NewID(kind, rest)
	}
	if err := id.Validate(); err != nil {
		return ID{}, err
	}
	return id, nil
}

// MarshalText implements encoding.TextMarshaler, so IDs can travel in JSON
// envelopes. The zero ID is the empty text, as netip.Addr's zero value is:
// a struct with an ID not set yet — a match's opponent before one is found
// — encodes, and reads back with the ID zero; a JSON field tagged omitzero
// leaves it out. An ID that is not valid otherwise is refused with
// Validate's error, and one whose kind or key is not valid UTF-8 (a binary
// key) with ErrInvalidID: text encoders such as encoding/json would replace
// its bytes, and the ID read back would name another grain. The wire form
// (queues.AppendEnvelope) carries any bytes.
func (id ID) MarshalText() ([]byte, error) {
	if id.IsZero() {
		return []byte{}, nil
	}
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if !utf8.ValidString(id.kind) || !utf8.ValidString(id.key) {
		return nil, &IDError{ID: id, Err: fmt.Errorf("%w: not valid UTF-8, which text cannot carry", ErrInvalidID)}
	}
	return []byte(id.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. The empty text is the
// zero ID, as MarshalText writes it; any other text must parse (ParseID,
// which refuses the empty string: it names no grain).
func (id *ID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*id = ID{}
		return nil
	}
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Hash returns the identity's 64-bit hash: the xxhash64 of the kind,
// folded with the key — the int key itself, or the xxhash64 of the string
// key — through a multiply-rotate step and xxhash64's final avalanche:
//
//	int key:    fold(xxhash64(kind), uint64(key))
//	string key: fold(^xxhash64(kind), xxhash64(key))
//	fold(a, b) = avalanche(rotl64(a ^ b*P2, 31) * P1)
//
// with P1, P2 and avalanche as in xxhash64. Kind and key are hashed where
// they lie, never copied into one buffer first (whose reassembled words
// cost a store-forwarding stall per hash), and for one kind, distinct int
// keys never collide: fold is a bijection in b. Hash is stable across
// processes and releases; the silo maps an ID to its partition with it
// (queues.Partitioner).
func (id ID) Hash() uint64 { return id.HashWithKind(KindHash(id.kind)) }

// KindHash returns what a kind's name contributes to the hash of its IDs:
// a runtime that hashes many IDs of a few kinds keeps it, and hashes each
// ID with HashWithKind, without hashing the name again.
func KindHash(kind string) uint64 { return xxhash.Sum64String(kind) }

// HashWithKind returns id.Hash(), given kh = KindHash(id.Kind()).
func (id *ID) HashWithKind(kh uint64) uint64 {
	if id.isInt {
		return fold(kh, uint64(id.ikey))
	}
	return fold(^kh, xxhash.Sum64String(id.key))
}

// The primes of xxhash64.
const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
)

func fold(a, b uint64) uint64 {
	x := a ^ b*prime2
	x = bits.RotateLeft64(x, 31) * prime1
	x ^= x >> 33
	x *= prime2
	x ^= x >> 29
	x *= prime3
	x ^= x >> 32
	return x
}
