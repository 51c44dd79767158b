package grain

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// ID is a grain's identity: a kind (the grain's type, as registered with the
// silo) and a key. Keys are strings or int64s; an int key and the string of the
// same digits are different identities, as in Orleans.
//
// ID is a comparable value: use it as a map key, compare it with ==. The zero
// ID is invalid. Build IDs with NewID or NewIntID.
type ID struct {
	kind  string
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
// ParseID reverses it.
func (id ID) String() string {
	if id.isInt {
		return id.kind + "#" + strconv.FormatInt(id.ikey, 10)
	}
	return id.kind + "/" + id.key
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
// envelopes.
func (id ID) MarshalText() ([]byte, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	return []byte(id.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Hash returns the 64-bit xxhash of the identity: of the kind, a 0x00 byte and
// the string key, or of the kind, a 0x01 byte and the int key as 8 big-endian
// bytes. It is stable across processes and releases; the silo maps an ID to
// its partition with Hash() % partitions.
func (id ID) Hash() uint64 {
	// The identity's bytes go to a small stack buffer and one-shot Sum64;
	// only identities longer than it stream through a Digest. Both give the
	// same value.
	var buf [32]byte
	if id.isInt && len(id.kind) <= len(buf)-9 {
		n := copy(buf[:], id.kind)
		buf[n] = 1
		binary.BigEndian.PutUint64(buf[n+1:], uint64(id.ikey))
		return xxhash.Sum64(buf[:n+9])
	}
	if !id.isInt && len(id.kind)+1+len(id.key) <= len(buf) {
		n := copy(buf[:], id.kind)
		buf[n] = 0
		n++
		n += copy(buf[n:], id.key)
		return xxhash.Sum64(buf[:n])
	}
	return id.hashLong()
}

// hashLong streams a long identity through the library's Digest.
func (id ID) hashLong() uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(id.kind)
	if id.isInt {
		var b [9]byte
		b[0] = 1
		binary.BigEndian.PutUint64(b[1:], uint64(id.ikey))
		_, _ = d.Write(b[:])
	} else {
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(id.key)
	}
	return d.Sum64()
}
