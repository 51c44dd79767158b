// Package silotest helps test grains on a real silo, as net/http/httptest
// helps test handlers on a real server: a silo that shuts down with the
// test (Start), a probe that receives what grains tell it and fails the
// test when the wait runs out (Probe, Akka's TestProbe, on a
// silo.Observer), a record of the silo's dead letters (DeadLetterLog), and
// a logger that writes to the test (NewLogger).
//
// A test waits for what a grain does on its own — a timer's work, the
// effect of a tell — by having the grain tell a probe: the test wakes when
// it happens, with no polling and no sleep. Timeouts here bound a failing
// test; they never synchronise a passing one.
//
// Concurrency: everything here is for the test's own goroutine, as t is:
// a failure calls t.Fatalf, which must not be called from another. The silo
// itself, and a Probe's ID, may be used from any goroutine.
package silotest

import (
	"context"
	"testing"
	"time"

	"github.com/granary-go/granary/silo"
)

// DefaultTimeout is how long a Probe waits, and how long the silo's
// Shutdown at the end of a test may take, unless told otherwise.
const DefaultTimeout = 5 * time.Second

// Start makes a silo with cfg, calls register to register its kinds, and
// starts it; any error fails the test at once. When the test ends, the silo
// shuts down gracefully (within DefaultTimeout; OnDeactivate runs), and the
// test fails if the Shutdown does. A test may Shutdown or Close the silo
// itself before: the cleanup then does nothing more. A cfg with no Logger
// gets NewLogger(t): the silo logs to the test. Config.CheckContexts is
// turned on: a grain that hands its *grain.Context to a goroutine which
// uses it after the turn panics there with a *grain.ContextAfterTurnError,
// instead of reading another grain's turn as it would in production; and a
// call a turn makes with a ctx that is not the turn's fails at once with
// grain.ErrForeignContext, instead of hiding a deadlock until its timeout.
func Start(t testing.TB, cfg silo.Config, register func(*silo.Silo) error) *silo.Silo {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = NewLogger(t)
	}
	cfg.CheckContexts = true
	s, err := silo.New(cfg)
	if err != nil {
		t.Fatalf("silotest: New: %v", err)
	}
	if register != nil {
		if err := register(s); err != nil {
			s.Close()
			t.Fatalf("silotest: registering kinds: %v", err)
		}
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("silotest: Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("silotest: Shutdown at the end of the test: %v", err)
		}
	})
	return s
}
