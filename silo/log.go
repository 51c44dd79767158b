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

// write queues a line that sampled let through for the silo's log writer
// (logwriter.go), which writes it on a goroutine of its own: whatever the
// Logger's handler does — block, panic, runtime.Goexit — the owner that
// logged goes on with its work.
func (s *Silo) write(level slog.Level, msg string, droppedBefore uint64, args ...any) {
	if droppedBefore > 0 {
		args = append(args, "dropped_lines", droppedBefore)
	}
	if s.cfg.Name != DefaultName {
		// A silo given a name says it: silos of one process share
		// slog.Default() unless each is given a Logger.
		args = append(args, "silo", s.cfg.Name)
	}
	s.logw.add(level, msg, args)
}
