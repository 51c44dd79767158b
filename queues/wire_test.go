package queues_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
)

// stringCodec encodes string messages as their bytes and refuses anything
// else, so a test can make either side fail.
var (
	stringEnc = queues.MessageEncoderFunc(func(b []byte, msg any) ([]byte, error) {
		s, ok := msg.(string)
		if !ok {
			return b, errors.New("not a string")
		}
		return append(b, s...), nil
	})
	stringDec = queues.MessageDecoderFunc(func(b []byte) (any, error) {
		if bytes.Equal(b, []byte("undecodable")) {
			return nil, errors.New("refused")
		}
		return string(b), nil
	})
)

// withDeadline is a ctx with a deadline and nothing to cancel.
type withDeadline struct {
	context.Context
	d time.Time
}

func (c withDeadline) Deadline() (time.Time, bool) { return c.d, true }

func wireEnvelopes(tb testing.TB) map[string]queues.Envelope {
	tb.Helper()
	ctx := withDeadline{tb.Context(), time.Unix(1700000000, 123456789)}
	target := grain.NewID("player", "p1")
	// A call back into a grain that waits in the chain, through grains of
	// two silos.
	ask := queues.NewRequest(ctx, queues.Chain{{ID: grain.NewIntID("lobby", -7), Silo: 1 << 63, SiloName: "eu-1"},
		{ID: target, Silo: 7, SiloName: "eu-2", AllowReentry: true}, {ID: grain.NewID("room", "r/9"), Silo: 7, SiloName: "eu-2"}})
	return map[string]queues.Envelope{
		"tell":            {Target: target, Msg: "move"},
		"int key":         {Target: grain.NewIntID("device", 1<<40), Msg: ""},
		"from a grain":    {Target: target, Msg: "hi", Meta: &queues.Meta{Sender: grain.NewID("lobby", "main")}},
		"tick":            {Target: target, Msg: "autosave", Meta: &queues.Meta{Tick: &queues.Tick{Name: "autosave", Seq: 300}}},
		"ask":             {Target: target, Msg: "balance?", Request: queues.NewRequest(tb.Context(), nil)},
		"ask in a chain":  {Target: target, Msg: "join", Request: ask, Meta: &queues.Meta{Sender: grain.NewID("room", "r/9")}},
		"long message":    {Target: target, Msg: string(bytes.Repeat([]byte{'x'}, 300))},
		"unicode + bytes": {Target: grain.NewID("könig", "\x00\xff"), Msg: "ü"},
		"carrying a span": {Target: target, Msg: &queues.Carrying{Msg: "move", Carried: "00-4bf92f-00f067-01"}},
		"carried from a grain": {Target: target, Msg: &queues.Carrying{Msg: "join", Carried: "tenant-7"},
			Meta: &queues.Meta{Sender: grain.NewID("lobby", "main")}},
	}
}

func TestEnvelopeWireRoundTrip(t *testing.T) {
	for name, env := range wireEnvelopes(t) {
		t.Run(name, func(t *testing.T) {
			b, err := queues.AppendEnvelope([]byte("prefix"), &env, stringEnc)
			require.NoError(t, err)
			require.Equal(t, "prefix", string(b[:6]), "appends, keeping what b held")
			b = append(b, "next frame"...)

			got, call, rest, err := queues.DecodeEnvelope(b[6:], stringDec)
			require.NoError(t, err)
			require.Equal(t, "next frame", string(rest))
			require.Equal(t, env.Target, got.Target)
			require.Equal(t, env.Target.Hash(), got.Hash, "the receiver computes the hash")
			require.Equal(t, env.Msg, got.Msg)
			require.Nil(t, got.Request, "the reply handle is local; the Call crosses instead")
			require.Equal(t, env.Sender(), got.Sender())
			require.Equal(t, env.Tick(), got.Tick())
			if env.Meta == nil {
				require.Nil(t, got.Meta)
			}
			if env.Request == nil {
				require.Nil(t, call)
				return
			}
			require.NotNil(t, call)
			require.Equal(t, env.Request.Chain, call.Chain)
			d, ok := env.Request.Ctx.Deadline()
			require.Equal(t, ok, !call.Deadline.IsZero())
			if ok {
				require.True(t, d.Equal(call.Deadline), "%v != %v", d, call.Deadline)
			}
		})
	}
}

// A deadline beyond what nanoseconds since 1970 can hold (a program's
// "never") stays in the far future instead of wrapping into the past.
func TestEnvelopeWireFarDeadline(t *testing.T) {
	for _, d := range []time.Time{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		env := queues.Envelope{Target: grain.NewID("k", "x"), Msg: "m", Request: queues.NewRequest(withDeadline{t.Context(), d}, nil)}
		b, err := queues.AppendEnvelope(nil, &env, stringEnc)
		require.NoError(t, err)
		_, call, _, err := queues.DecodeEnvelope(b, stringDec)
		require.NoError(t, err)
		if d.Year() > 2000 {
			require.True(t, call.Deadline.After(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)), "%v", call.Deadline)
		} else {
			require.True(t, call.Deadline.Before(time.Date(1678, 12, 31, 0, 0, 0, 0, time.UTC)), "%v", call.Deadline)
		}
	}
}

// Frames written one after another are read back one after another.
func TestEnvelopeWireFramesInARow(t *testing.T) {
	var b []byte
	var want []grain.ID
	for i := range 5 {
		env := queues.Envelope{Target: grain.NewIntID("k", int64(i)), Msg: "m"}
		var err error
		b, err = queues.AppendEnvelope(b, &env, stringEnc)
		require.NoError(t, err)
		want = append(want, env.Target)
	}
	var got []grain.ID
	for len(b) > 0 {
		env, _, rest, err := queues.DecodeEnvelope(b, stringDec)
		require.NoError(t, err)
		got = append(got, env.Target)
		b = rest
	}
	require.Equal(t, want, got)
}

func TestEnvelopeWireRefusesWhatItCannotEncode(t *testing.T) {
	b := []byte("keep")
	bad := queues.Envelope{Target: grain.NewID("", "x"), Msg: "m"}
	out, err := queues.AppendEnvelope(b, &bad, stringEnc)
	require.ErrorIs(t, err, grain.ErrEmptyKind)
	require.Equal(t, "keep", string(out))

	notString := queues.Envelope{Target: grain.NewID("k", "x"), Msg: 42}
	out, err = queues.AppendEnvelope(b, &notString, stringEnc)
	require.ErrorContains(t, err, "not a string")
	require.Equal(t, "keep", string(out), "b as it was, not half a frame")

	badCarried := queues.Envelope{Target: grain.NewID("k", "x"), Msg: &queues.Carrying{Msg: "m", Carried: 7}}
	out, err = queues.AppendEnvelope(b, &badCarried, stringEnc)
	require.ErrorContains(t, err, "carries")
	require.ErrorContains(t, err, "not a string")
	require.Equal(t, "keep", string(out))

	out, err = queues.AppendEnvelope(b, nil, stringEnc) // was a nil dereference
	require.ErrorIs(t, err, grain.ErrNilMessage)
	require.Equal(t, "keep", string(out))

	_, err = queues.AppendEnvelope(nil, &notString, nil)
	require.ErrorIs(t, err, queues.ErrNilCodec)
	_, _, _, err = queues.DecodeEnvelope([]byte{1, 0}, nil)
	require.ErrorIs(t, err, queues.ErrNilCodec)
}

func TestEnvelopeWireRefusesMalformedBytes(t *testing.T) {
	for name, env := range wireEnvelopes(t) {
		b, err := queues.AppendEnvelope(nil, &env, stringEnc)
		require.NoError(t, err)
		for n := range len(b) { // every truncation
			_, _, _, err := queues.DecodeEnvelope(b[:n], stringDec)
			require.ErrorIs(t, err, queues.ErrMalformedEnvelope, "%s cut at %d of %d", name, n, len(b))
		}
	}

	good := queues.Envelope{Target: grain.NewID("k", "x"), Msg: "m"}
	frame, err := queues.AppendEnvelope(nil, &good, stringEnc)
	require.NoError(t, err)
	with := func(i int, v byte) []byte {
		c := bytes.Clone(frame)
		c[i] = v
		return c
	}
	for name, tc := range map[string]struct {
		b    []byte
		also error
	}{
		"version 1":            {b: with(0, 1)}, // no silo in its links
		"version 2":            {b: with(0, 2)}, // no silo name
		"unknown flag":         {b: with(1, 0x80)},
		"tell with a deadline": {b: with(1, 8)},
		"bad ID form":          {b: with(2, 7)},
		"empty kind":           {b: []byte{3, 0, 0, 0, 1, 'x', 1, 'm'}, also: grain.ErrEmptyKind},
		"kind with a slash":    {b: []byte{3, 0, 0, 1, '/', 1, 'x', 1, 'm'}, also: grain.ErrInvalidKind},
		"empty string key":     {b: []byte{3, 0, 0, 1, 'k', 0, 1, 'm'}, also: grain.ErrEmptyKey},
		"huge chain count":     {b: []byte{3, 1, 0, 1, 'k', 1, 'x', 0xff, 0xff, 0xff, 0xff, 0x0f, 0}},
		"bool neither 0 nor 1": {b: []byte{3, 1, 0, 1, 'k', 1, 'x', 1, 1, 1, 'k', 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0}},
		"silo name past end":   {b: []byte{3, 1, 0, 1, 'k', 1, 'x', 1, 1, 1, 'k', 2, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0}},
		"message past the end": {b: []byte{3, 0, 0, 1, 'k', 1, 'x', 9, 'm'}},
		"non-minimal varint":   {b: []byte{3, 0, 0, 0x81, 0x00, 'k', 1, 'x', 1, 'm'}},
		"overlong varint":      {b: []byte{3, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		_, _, rest, err := queues.DecodeEnvelope(tc.b, stringDec)
		require.ErrorIs(t, err, queues.ErrMalformedEnvelope, name)
		if tc.also != nil {
			require.ErrorIs(t, err, tc.also, name)
		}
		require.Equal(t, tc.b, rest, "%s: nothing taken", name)
	}

	// The decoder's own refusal is its error, not a malformed frame.
	undecodable := queues.Envelope{Target: grain.NewID("k", "x"), Msg: "undecodable"}
	frame, err = queues.AppendEnvelope(nil, &undecodable, stringEnc)
	require.NoError(t, err)
	_, _, _, err = queues.DecodeEnvelope(frame, stringDec)
	require.ErrorContains(t, err, "refused")
	require.NotErrorIs(t, err, queues.ErrMalformedEnvelope)

	// So is a refusal of what the message carries; and carried bytes that
	// decode to nil, which no sender writes, are malformed.
	carrying := &queues.Carrying{Msg: "m", Carried: "undecodable"}
	frame, err = queues.AppendEnvelope(nil, &queues.Envelope{Target: grain.NewID("k", "x"), Msg: carrying}, stringEnc)
	require.NoError(t, err)
	_, _, _, err = queues.DecodeEnvelope(frame, stringDec)
	require.ErrorContains(t, err, "carries")
	require.ErrorContains(t, err, "refused")
	nilDec := queues.MessageDecoderFunc(func(b []byte) (any, error) {
		if string(b) == "nothing" {
			return nil, nil
		}
		return string(b), nil
	})
	carrying.Carried = "nothing"
	frame, err = queues.AppendEnvelope(nil, &queues.Envelope{Target: grain.NewID("k", "x"), Msg: carrying}, stringEnc)
	require.NoError(t, err)
	_, _, rest, err := queues.DecodeEnvelope(frame, nilDec)
	require.ErrorIs(t, err, queues.ErrMalformedEnvelope)
	require.Equal(t, frame, rest)
}

// The decoder gets the message's bytes alone, and whatever else b holds
// does not leak into the strings it returns.
func TestEnvelopeWireDecodedStringsDoNotAliasTheFrame(t *testing.T) {
	env := queues.Envelope{Target: grain.NewID("player", "p1"), Msg: "m", Meta: &queues.Meta{Sender: grain.NewID("lobby", "main")}}
	b, err := queues.AppendEnvelope(nil, &env, stringEnc)
	require.NoError(t, err)
	got, _, _, err := queues.DecodeEnvelope(b, stringDec)
	require.NoError(t, err)
	for i := range b {
		b[i] = 0
	}
	require.Equal(t, env.Target, got.Target)
	require.Equal(t, env.Meta.Sender, got.Meta.Sender)
}

func FuzzDecodeEnvelope(f *testing.F) {
	for _, env := range wireEnvelopes(f) {
		b, err := queues.AppendEnvelope(nil, &env, stringEnc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 1, 'k', 1, 'x', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		env, call, rest, err := queues.DecodeEnvelope(b, stringDec)
		if err != nil {
			require.Equal(t, b, rest)
			return
		}
		require.NoError(t, env.Target.Validate())
		require.Equal(t, env.Target.Hash(), env.Hash)
		// What decodes encodes back to the same frame, and decodes again
		// to the same envelope.
		frame := b[:len(b)-len(rest)]
		if call != nil {
			var ctx context.Context = t.Context()
			if !call.Deadline.IsZero() {
				ctx = withDeadline{ctx, call.Deadline}
			}
			env.Request = queues.NewRequest(ctx, call.Chain)
		}
		again, err := queues.AppendEnvelope(nil, &env, stringEnc)
		require.NoError(t, err)
		require.Equal(t, frame, again)
	})
}
