package grain_test

import (
	"encoding"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// Counts by reason, as silo.Stats holds them, encode with the reasons'
// names and read back: a stats endpoint's JSON says what was lost and why.
func TestReasonsEncodeAsTheirNames(t *testing.T) {
	dead := map[grain.Reason]uint64{grain.ReasonStopped: 3, grain.ReasonActivationFailed: 1}
	b, err := json.Marshal(dead)
	require.NoError(t, err)
	assert.JSONEq(t, `{"stopped":3,"activation failed":1}`, string(b))
	var deadBack map[grain.Reason]uint64
	require.NoError(t, json.Unmarshal(b, &deadBack))
	assert.Equal(t, dead, deadBack)

	gone := map[grain.DeactivationReason]uint64{grain.DeactivationIdle: 7, grain.DeactivationMemoryPressure: 2}
	b, err = json.Marshal(gone)
	require.NoError(t, err)
	assert.JSONEq(t, `{"idle":7,"memory pressure":2}`, string(b))
	var goneBack map[grain.DeactivationReason]uint64
	require.NoError(t, json.Unmarshal(b, &goneBack))
	assert.Equal(t, gone, goneBack)

	// Every defined reason round-trips, as a value too.
	roundTripsAll[grain.Reason](t, grain.NumReasons)
	roundTripsAll[grain.DeactivationReason](t, grain.NumDeactivationReasons)
}

// roundTripsAll checks that each of the n defined values of a reason type
// marshals to its String and reads back.
func roundTripsAll[R interface {
	~uint8
	String() string
	MarshalText() ([]byte, error)
}, P interface {
	*R
	UnmarshalText([]byte) error
}](t *testing.T, n int) {
	t.Helper()
	for r := range R(n) {
		var back R
		text, err := r.MarshalText()
		require.NoError(t, err)
		require.NoError(t, P(&back).UnmarshalText(text))
		assert.Equal(t, r, back)
		assert.Equal(t, r.String(), string(text))
	}
}

// A reason past the defined ones, or a name that is none of theirs, is
// refused: it would read back as another reason.
func TestAnUndefinedReasonIsRefused(t *testing.T) {
	_, err := grain.Reason(grain.NumReasons).MarshalText()
	require.ErrorIs(t, err, grain.ErrInvalidReason)
	_, err = grain.DeactivationReason(200).MarshalText()
	require.ErrorIs(t, err, grain.ErrInvalidReason)
	_, err = json.Marshal(map[grain.Reason]int{grain.Reason(99): 1})
	require.ErrorContains(t, err, grain.ErrInvalidReason.Error()) // encoding/json does not wrap a map key's error

	r := grain.ReasonExpired
	require.ErrorIs(t, r.UnmarshalText([]byte("Stopped")), grain.ErrInvalidReason)
	require.ErrorIs(t, r.UnmarshalText(nil), grain.ErrInvalidReason)
	assert.Equal(t, grain.ReasonExpired, r, "unchanged")
	d := grain.DeactivationIdle
	require.ErrorIs(t, d.UnmarshalText([]byte("bored")), grain.ErrInvalidReason)
	assert.Equal(t, grain.DeactivationIdle, d, "unchanged")
	var m map[grain.Reason]int
	require.ErrorIs(t, json.Unmarshal([]byte(`{"lost in the post":1}`), &m), grain.ErrInvalidReason)
}

// Whatever text comes in — a stats endpoint's JSON read back, a hand-edited
// file — reading a reason never panics, and a name it accepts writes back
// as the same text: no two names for one reason, no reason read as another.
func FuzzReasonUnmarshalText(f *testing.F) {
	for _, s := range []string{"stopped", "idle", "shutdown", "", "Stopped", "stopped\x00", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		readsBackAsWritten(t, new(grain.Reason), b)
		readsBackAsWritten(t, new(grain.DeactivationReason), b)
	})
}

// readsBackAsWritten reads b into r: refused with ErrInvalidReason, or
// written back as b.
func readsBackAsWritten(t *testing.T, r interface {
	encoding.TextMarshaler
	encoding.TextUnmarshaler
}, b []byte) {
	if err := r.UnmarshalText(b); err != nil {
		require.ErrorIs(t, err, grain.ErrInvalidReason)
		return
	}
	out, err := r.MarshalText()
	require.NoError(t, err)
	require.Equal(t, string(b), string(out))
}
