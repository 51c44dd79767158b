package silotest

import (
	"log/slog"
	"strings"
	"testing"
)

// NewLogger returns a logger that writes each line through t.Log, as
// zaptest.NewLogger does: the silo's warnings — a failed tell, a dead
// letter, a slow turn — show with the test that caused them, when it fails
// or under -v, and nowhere else. Start gives a silo one unless its Config
// has a Logger. Safe for concurrent use, as t.Log is.
func NewLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter passes each line a slog.TextHandler writes — one Write a
// line — to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
