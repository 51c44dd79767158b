package silo

import (
	"fmt"
	"log/slog"
)

// LogValue implements slog.LogValuer: a dead letter logged as an attribute
// (logger.Info("lost", "letter", d)) is a group of its target, sender,
// reason, cause and the message's type — the type, not the value, as the
// silo's own lines give it: a message may be large or private, and one that
// does not encode (a channel in it) made a JSON handler write an error in
// the letter's place.
func (d DeadLetter) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("target", d.Target.String()),
		slog.String("reason", d.Reason.String()),
		slog.String("msg_type", fmt.Sprintf("%T", d.Msg)),
		slog.Bool("ask", d.Ask))
	if !d.Sender.IsZero() {
		attrs = append(attrs, slog.String("sender", d.Sender.String()))
	}
	if d.Err != nil {
		attrs = append(attrs, slog.String("err", d.Err.Error()))
	}
	if !d.Time.IsZero() {
		attrs = append(attrs, slog.Time("time", d.Time))
	}
	return slog.GroupValue(attrs...)
}
