package silo

import "log/slog"

// log writes a line through Config.Logger on a goroutine of its own, and
// waits for it. The silo logs from its partition owners, in the middle of
// their work: a handler that ends its goroutine with runtime.Goexit — a
// test's handler calling t.FailNow on a warning — would end the owner's with
// it, leaving that work half done and, when it came while the owner
// handled such an exit already, the partition with no owner at all. Lines
// are rare (failures, slow turns), so a goroutine each costs nothing that
// matters.
func (s *Silo) log(level slog.Level, msg string, args ...any) {
	l := s.cfg.Logger
	done := make(chan struct{})
	go func() {
		defer close(done) // also when the handler calls runtime.Goexit
		switch {
		case level >= slog.LevelError:
			l.Error(msg, args...)
		case level >= slog.LevelWarn:
			l.Warn(msg, args...)
		default:
			l.Info(msg, args...)
		}
	}()
	<-done
}
