package silo

import "log/slog"

// log writes a line through Config.Logger, unless Config.LogSampling holds
// it back (logsample.go).
func (s *Silo) log(level slog.Level, msg string, args ...any) {
	if write, dropped := s.sampled(msg); write {
		s.write(level, msg, dropped, args...)
	}
}

// sampled reports whether a line with msg is to be written now, and how many
// with it were dropped before. A caller whose arguments cost something to
// make asks first, and makes them only for a line that will be written.
func (s *Silo) sampled(msg string) (write bool, droppedBefore uint64) {
	return s.logs.admit(msg, s.since())
}

// write writes a line that sampled let through, on a goroutine of its own,
// and waits for it; a line whose handler panics is counted as dropped. The silo logs from its partition owners, in the middle
// of their work: a handler that ends its goroutine with runtime.Goexit — a
// test's handler calling t.FailNow on a warning — would end the owner's
// with it, leaving that work half done and, when it came while the owner
// handled such an exit already, the partition with no owner at all. Lines
// are rare (failures, slow turns; a storm is sampled), so a goroutine each
// costs nothing that matters.
func (s *Silo) write(level slog.Level, msg string, droppedBefore uint64, args ...any) {
	if droppedBefore > 0 {
		args = append(args, "dropped_lines", droppedBefore)
	}
	l := s.cfg.Logger
	done := make(chan struct{})
	go func() {
		defer close(done) // also when the handler calls runtime.Goexit
		defer func() {
			// A handler that panics loses its line, counted as dropped;
			// the panic is not the silo's to die of.
			if r := recover(); r != nil {
				s.logs.dropped.Add(1)
			}
		}()
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
