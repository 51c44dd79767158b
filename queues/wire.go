package queues

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/granary-go/granary/grain"
)

// The wire form of an envelope: the seam for silos that pass messages to
// one another. An envelope is plain data but for its Request, the caller's
// local reply handle; what of an ask crosses silos is its Call — the chain it
// extends and the caller's deadline — and the transport that carries the
// bytes routes the reply back. The message itself is the application's to
// encode, through a MessageEncoder and MessageDecoder.
//
// Layout (version 3), integers as varints:
//
//	version  byte  (3)
//	flags    byte  (1 ask, 2 sender, 4 tick, 8 deadline, 16 carried)
//	target   ID
//	sender   ID                      if flags&2
//	tick     name string, seq        if flags&4
//	deadline unix nanoseconds        if flags&8
//	chain    count, then per link: ID, silo (8 bytes, little-endian), silo name string, allow-reentry byte (0 or 1)   if flags&1
//	carried  length, then the MessageEncoder's bytes   if flags&16
//	message  length, then the MessageEncoder's bytes
//
// A message that carries something (a *Carrying in Msg) has both: what it
// carries and the message itself go through the MessageEncoder.
//
//	ID       form byte (0 string key, 1 int key), kind string, then key string or int key
//	string   length, bytes
//
// What can be derived is not sent, so a frame cannot carry a value that
// disagrees with the rest: the identity hash (the receiver computes it from
// the target), and whether an ask interleaves (it does when its target
// already waits in its chain, in the receiving silo: Chain.Find with the
// receiver's own silo number — a sender refuses the call at once with a
// CallCycleError when that is not allowed).
//
// Version 1 had no silo in a chain's links, version 2 no silo name.

// wireVersion is the layout above. A decoder refuses any other.
const wireVersion = 3

const (
	flagAsk = 1 << iota
	flagSender
	flagTick
	flagDeadline
	flagCarried
	flagsKnown = flagAsk | flagSender | flagTick | flagDeadline | flagCarried
)

// ErrMalformedEnvelope is the error for bytes that are not an envelope's
// wire form. Decode errors wrap it, with what was wrong and where.
var ErrMalformedEnvelope = errors.New("granary: malformed envelope")

// ErrNilCodec is the error when AppendEnvelope or DecodeEnvelope is given a
// nil message encoder or decoder.
var ErrNilCodec = errors.New("granary: nil message codec")

// Call is what of an ask crosses silos with its envelope. The receiving side
// makes the Request from it, with a ctx of its own bounded by Deadline.
// Deadline is wall-clock time, to the nanosecond: silos that exchange calls
// keep their clocks close, or the transport adjusts it.
//
// Whether the ask interleaves is not in it: the target waits in Chain in
// the receiving silo (Chain.Find with that silo's number), which only the
// receiver knows.
type Call struct {
	Chain    Chain     // the grains waiting for the call, outermost first
	Deadline time.Time // the caller's; zero for none
}

// MessageEncoder appends the encoding of a message to b. Implementations
// must be safe for concurrent use if the transport encodes concurrently.
type MessageEncoder interface {
	AppendMessage(b []byte, msg any) ([]byte, error)
}

// MessageEncoderFunc adapts a function to MessageEncoder.
type MessageEncoderFunc func(b []byte, msg any) ([]byte, error)

// AppendMessage calls f.
func (f MessageEncoderFunc) AppendMessage(b []byte, msg any) ([]byte, error) { return f(b, msg) }

// MessageDecoder turns bytes a MessageEncoder wrote back into a message. b
// is the message's bytes alone; a decoder must not keep b, which belongs to
// the caller of DecodeEnvelope.
type MessageDecoder interface {
	DecodeMessage(b []byte) (any, error)
}

// MessageDecoderFunc adapts a function to MessageDecoder.
type MessageDecoderFunc func(b []byte) (any, error)

// DecodeMessage calls f.
func (f MessageDecoderFunc) DecodeMessage(b []byte) (any, error) { return f(b) }

// AppendEnvelope appends the wire form of env to b. An ask's Call is taken
// from env.Request: its Chain and its ctx's deadline. A target
// that is no valid identity is refused with its error, a nil env with
// grain.ErrNilMessage; enc's error is returned wrapped. On an error b is
// returned as it was.
func AppendEnvelope(b []byte, env *Envelope, enc MessageEncoder) ([]byte, error) {
	if enc == nil {
		return b, fmt.Errorf("%w: no MessageEncoder", ErrNilCodec)
	}
	if env == nil {
		return b, fmt.Errorf("granary: encoding a nil *Envelope: %w", grain.ErrNilMessage)
	}
	if err := env.Target.Validate(); err != nil {
		return b, fmt.Errorf("granary: encoding an envelope: %w", err)
	}
	start := len(b)
	var flags byte
	var deadline time.Time
	if r := env.Request; r != nil {
		flags |= flagAsk
		if r.Ctx != nil {
			if d, ok := r.Ctx.Deadline(); ok {
				flags |= flagDeadline
				deadline = d
			}
		}
	}
	if m := env.Meta; m != nil {
		if !m.Sender.IsZero() {
			flags |= flagSender
		}
		if m.Tick != nil {
			flags |= flagTick
		}
	}
	msg, carried := Unwrap(env.Msg)
	if carried != nil {
		flags |= flagCarried
	}
	b = append(b, wireVersion, flags)
	b = appendID(b, env.Target)
	if flags&flagSender != 0 {
		b = appendID(b, env.Meta.Sender)
	}
	if flags&flagTick != 0 {
		b = appendString(b, env.Meta.Tick.Name)
		b = binary.AppendUvarint(b, env.Meta.Tick.Seq)
	}
	if flags&flagDeadline != 0 {
		b = binary.AppendVarint(b, unixNano(deadline))
	}
	if flags&flagAsk != 0 {
		b = binary.AppendUvarint(b, uint64(len(env.Request.Chain)))
		for _, l := range env.Request.Chain {
			b = appendID(b, l.ID)
			b = binary.LittleEndian.AppendUint64(b, l.Silo)
			b = appendString(b, l.SiloName)
			b = appendBool(b, l.AllowReentry)
		}
	}
	var err error
	if carried != nil {
		if b, err = appendEncoded(b, carried, enc); err != nil {
			return b[:start], fmt.Errorf("granary: encoding what the message to %v carries: %w", env.Target, err)
		}
	}
	if b, err = appendEncoded(b, msg, enc); err != nil { // the message last
		return b[:start], fmt.Errorf("granary: encoding the message for %v: %w", env.Target, err)
	}
	return b, nil
}

// appendEncoded appends v as enc encodes it, behind its length — which is
// known only once enc has written it: written first, it is moved up by the
// length's size. On an error the caller cuts off what was appended.
func appendEncoded(b []byte, v any, enc MessageEncoder) ([]byte, error) {
	mark := len(b)
	b, err := enc.AppendMessage(b, v)
	if err != nil {
		return b, err
	}
	n := len(b) - mark
	var lenBuf [binary.MaxVarintLen64]byte
	ln := binary.PutUvarint(lenBuf[:], uint64(n))
	b = append(b, lenBuf[:ln]...) // grow by the length's size
	copy(b[mark+ln:], b[mark:mark+n])
	copy(b[mark:], lenBuf[:ln])
	return b, nil
}

// DecodeEnvelope parses the envelope at the start of b. It returns the
// envelope (with its Hash computed, and no Request), the Call if it is an
// ask (nil for a tell), and the bytes after it. Errors match
// ErrMalformedEnvelope, and, for a target that is no valid identity, the
// ID's own error (grain.ErrEmptyKind, ...); dec's errors are returned
// wrapped. It never panics, whatever b holds.
func DecodeEnvelope(b []byte, dec MessageDecoder) (Envelope, *Call, []byte, error) {
	if dec == nil {
		return Envelope{}, nil, b, fmt.Errorf("%w: no MessageDecoder", ErrNilCodec)
	}
	r := reader{b: b}
	if v := r.byte("version"); r.err == nil && v != wireVersion {
		return Envelope{}, nil, b, fmt.Errorf("%w: version %d, want %d", ErrMalformedEnvelope, v, wireVersion)
	}
	flags := r.byte("flags")
	if r.err == nil && flags&^flagsKnown != 0 {
		return Envelope{}, nil, b, fmt.Errorf("%w: unknown flags %#x", ErrMalformedEnvelope, flags&^flagsKnown)
	}
	var env Envelope
	env.Target = r.id("target")
	var meta Meta
	if flags&flagSender != 0 {
		meta.Sender = r.id("sender")
	}
	if flags&flagTick != 0 {
		meta.Tick = &Tick{Name: r.string("tick name")}
		meta.Tick.Seq = r.uvarint("tick seq")
	}
	if flags&(flagSender|flagTick) != 0 {
		env.Meta = &meta
	}
	var call *Call
	if flags&flagDeadline != 0 && flags&flagAsk == 0 && r.err == nil {
		r.fail("a tell with an ask's flags")
	}
	if flags&flagDeadline != 0 {
		call = &Call{Deadline: time.Unix(0, r.varint("deadline"))}
	}
	if flags&flagAsk != 0 {
		if call == nil {
			call = &Call{}
		}
		n := r.uvarint("chain length")
		// Every link takes at least thirteen bytes: no count can ask for
		// more links than the bytes left could hold.
		if r.err == nil && n > uint64(len(r.b))/13 {
			r.fail(fmt.Sprintf("chain of %d links in %d bytes", n, len(r.b)))
		}
		if r.err == nil && n > 0 {
			call.Chain = make(Chain, n)
			for i := range call.Chain {
				l := &call.Chain[i]
				l.ID = r.id("chain link")
				l.Silo = r.uint64("chain link's silo")
				l.SiloName = r.string("chain link's silo name")
				l.AllowReentry = r.bool("allow reentry")
			}
		}
	}
	var carried []byte
	if flags&flagCarried != 0 {
		carried = r.bytes("carried")
	}
	msg := r.bytes("message")
	if r.err != nil {
		return Envelope{}, nil, b, r.err
	}
	var err error
	if env.Msg, err = dec.DecodeMessage(msg); err != nil {
		return Envelope{}, nil, b, fmt.Errorf("granary: decoding the message for %v: %w", env.Target, err)
	}
	if flags&flagCarried != 0 {
		c := &Carrying{Msg: env.Msg}
		if c.Carried, err = dec.DecodeMessage(carried); err != nil {
			return Envelope{}, nil, b, fmt.Errorf("granary: decoding what the message to %v carries: %w", env.Target, err)
		}
		if c.Carried == nil { // nothing is carried by no flag: this frame would not encode back
			return Envelope{}, nil, b, fmt.Errorf("%w: carried bytes decode to nil", ErrMalformedEnvelope)
		}
		env.Msg = c
	}
	env.Hash = env.Target.Hash()
	return env, call, r.b, nil
}

// The times a UnixNano can hold: about 1678 to 2262.
var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// unixNano is t.UnixNano, held to the times it can represent: a deadline
// set far in the future as "never" stays far in the future, rather than
// wrapping around into the past.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minUnixNano):
		return math.MinInt64
	case t.After(maxUnixNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendID(b []byte, id grain.ID) []byte {
	if k, ok := id.IntKey(); ok {
		b = append(b, 1)
		b = appendString(b, id.Kind())
		return binary.AppendVarint(b, k)
	}
	b = append(b, 0)
	b = appendString(b, id.Kind())
	return appendString(b, id.Key())
}

// reader takes fields off the front of b; after the first error it reads
// nothing more and every field is zero.
type reader struct {
	b   []byte
	off int    // bytes taken, for the errors
	in  string // the field being read, for the errors (names are joined only on failure)
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		if r.in != "" {
			what = r.in + " " + what
		}
		r.err = fmt.Errorf("%w: %s at byte %d", ErrMalformedEnvelope, what, r.off)
	}
}

func (r *reader) take(n int) {
	r.b = r.b[n:]
	r.off += n
}

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("no " + what)
		return 0
	}
	v := r.b[0]
	r.take(1)
	return v
}

func (r *reader) bool(what string) bool {
	switch v := r.byte(what); v {
	case 0, 1:
		return v == 1
	default:
		r.fail(fmt.Sprintf("%s %d, want 0 or 1", what, v))
		return false
	}
}

// uint64 takes eight bytes, little-endian.
func (r *reader) uint64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail(fmt.Sprintf("%s of 8 bytes, %d left", what, len(r.b)))
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.take(8)
	return v
}

func (r *reader) uvarint(what string) uint64 {
	v, ok := r.next()
	if !ok {
		r.fail("bad " + what)
	}
	return v
}

// next takes a uvarint; false after an earlier error or for a bad one.
func (r *reader) next() (uint64, bool) {
	if r.err != nil {
		return 0, false
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || n != uvarintLen(v) { // one encoding per value: a frame decodes and encodes back to itself
		return 0, false
	}
	r.take(n)
	return v, true
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 || n != uvarintLen(uint64(v<<1)^uint64(v>>63)) { // zig-zag, as Varint reads it
		r.fail("bad " + what)
		return 0
	}
	r.take(n)
	return v
}

// uvarintLen is the size of v's shortest uvarint encoding, the one
// binary.AppendUvarint writes.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func (r *reader) bytes(what string) []byte {
	n, ok := r.next()
	if !ok {
		r.fail("bad length of " + what)
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("%s of %d bytes, %d left", what, n, len(r.b)))
		return nil
	}
	v := r.b[:n:n]
	r.take(int(n))
	return v
}

func (r *reader) string(what string) string { return string(r.bytes(what)) }

func (r *reader) id(what string) grain.ID {
	r.in = what
	defer func() { r.in = "" }()
	form := r.byte("form")
	kind := r.string("kind")
	var id grain.ID
	switch {
	case r.err != nil:
		return grain.ID{}
	case form == 0:
		id = grain.NewID(kind, r.string("key"))
	case form == 1:
		id = grain.NewIntID(kind, r.varint("key"))
	default:
		r.fail(fmt.Sprintf("form %d", form))
		return grain.ID{}
	}
	if r.err != nil {
		return grain.ID{}
	}
	if err := id.Validate(); err != nil {
		r.err = fmt.Errorf("%w: %s: %w", ErrMalformedEnvelope, what, err)
		return grain.ID{}
	}
	return id
}
