package silo

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// A dead letter as a record — logged through slog, encoded as JSON — says
// why: its target, reason, the message's type (not its value, as the silo's
// own lines give it: a message may be large or private, and one that does
// not encode, a channel in it, made a JSON handler write an error in the
// letter's place), whether it was an ask, its sender, its cause as text (an
// error encodes as {}) and when.

// deadLetterRecord is a DeadLetter's record form.
type deadLetterRecord struct {
	Target  string    `json:"target"`
	Reason  string    `json:"reason"`
	MsgType string    `json:"msg_type"`
	Ask     bool      `json:"ask"`
	Sender  string    `json:"sender,omitempty"`
	Err     string    `json:"err,omitempty"`
	Time    time.Time `json:"time,omitzero"`
}

func (d DeadLetter) record() deadLetterRecord {
	r := deadLetterRecord{
		Target:  d.Target.String(),
		Reason:  d.Reason.String(),
		MsgType: fmt.Sprintf("%T", d.Msg),
		Ask:     d.Ask,
		Sender:  d.Sender.String(), // empty for the zero ID: left out
		Time:    d.Time,
	}
	if d.Err != nil {
		r.Err = d.Err.Error()
	}
	return r
}

// LogValue implements slog.LogValuer: a dead letter logged as an attribute
// (logger.Info("lost", "letter", d)) is a group of its record's fields.
func (d DeadLetter) LogValue() slog.Value {
	r := d.record()
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("target", r.Target),
		slog.String("reason", r.Reason),
		slog.String("msg_type", r.MsgType),
		slog.Bool("ask", r.Ask))
	if r.Sender != "" {
		attrs = append(attrs, slog.String("sender", r.Sender))
	}
	if r.Err != "" {
		attrs = append(attrs, slog.String("err", r.Err))
	}
	if !r.Time.IsZero() {
		attrs = append(attrs, slog.Time("time", r.Time))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON implements json.Marshaler: the record, the same fields as
// LogValue's. It never fails for the message's sake: the message is given
// by type.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.record())
}

// String implements fmt.Stringer, so a dead letter printed with fmt reads
// as a line, not as its fields in braces: "granary: dead letter: tell
// main.Ping to player/p1 from lobby/l: stopped (cause)". The message is
// given by type, as in LogValue, and the time is left out: a caller that
// prints a letter as it arrives has the time at hand.
func (d DeadLetter) String() string {
	r := d.record()
	kind := "tell"
	if r.Ask {
		kind = "ask"
	}
	s := "granary: dead letter: " + kind + " " + r.MsgType + " to " + r.Target
	if r.Sender != "" {
		s += " from " + r.Sender
	}
	s += ": " + r.Reason
	if r.Err != "" {
		s += " (" + r.Err + ")"
	}
	return s
}
