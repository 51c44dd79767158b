package silo_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A dead letter logged as an attribute is a group of what says why, its
// message by type: one whose message holds a channel is logged, where a
// JSON handler wrote an error in its place.
func TestADeadLetterLogsAsAGroup(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	d := silo.DeadLetter{
		Target: grain.NewID("printer", "p"),
		Msg:    holdUntil{make(chan struct{}), nil},
		Reason: grain.ReasonOverload,
		Err:    errors.New("full"),
		Time:   time.Unix(1, 0).UTC(),
	}
	log.Info("lost", "letter", d)
	var line struct {
		Letter map[string]any `json:"letter"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	assert.Equal(t, map[string]any{
		"target":   "printer/p",
		"reason":   "overload",
		"msg_type": "silo_test.holdUntil",
		"ask":      false,
		"err":      "full",
		"time":     "1970-01-01T00:00:01Z",
	}, line.Letter)
}

// Encoded as JSON, a dead letter is the same record: it encodes whatever
// its message holds, and its cause as text.
func TestADeadLetterEncodesAsItsRecord(t *testing.T) {
	d := silo.DeadLetter{
		Target: grain.NewID("printer", "p"),
		Sender: grain.NewID("office", "o"),
		Msg:    holdUntil{make(chan struct{}), nil},
		Ask:    true,
		Reason: grain.ReasonStopped,
		Err:    errors.New("stopped by hand"),
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{"target":"printer/p","reason":"stopped","msg_type":"silo_test.holdUntil","ask":true,"sender":"office/o","err":"stopped by hand"}`, string(b))
}

// Printed with fmt, a dead letter is a line that says what was lost and
// why, its message by type.
func TestADeadLetterPrintsAsALine(t *testing.T) {
	d := silo.DeadLetter{
		Target: grain.NewID("printer", "p"),
		Msg:    holdUntil{make(chan struct{}), nil},
		Reason: grain.ReasonOverload,
		Time:   time.Unix(1, 0).UTC(),
	}
	assert.Equal(t, "granary: dead letter: tell silo_test.holdUntil to printer/p: overload", fmt.Sprint(d))
	d.Ask, d.Sender, d.Err, d.Reason = true, grain.NewID("office", "o"), errors.New("stopped by hand"), grain.ReasonStopped
	assert.Equal(t, "granary: dead letter: ask silo_test.holdUntil to printer/p from office/o: stopped (stopped by hand)", fmt.Sprintf("%v", d))
}
