package silo_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A tell's or a timer tick's turn that fails has no caller to hear of it:
// the silo logs it and counts it, rather than let the error go nowhere. An
// ask's failure goes to its caller, and is neither.
func TestAFailedTellIsLoggedAndCounted(t *testing.T) {
	var logged syncBuffer
	clk := clock.NewManual(time.Unix(0, 0))
	var ticked grain.ID // an observer the tick tells before it fails
	s := newSilo(t, silo.Config{Logger: newTextLogger(&logged), Clock: clk}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "f", func(grain.ID) grain.Func {
			return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
				switch msg {
				case "panic":
					panic("tell boom")
				case "tick":
					_ = c.Silo().Tell(ctx, ticked, "ticked")
					return nil, errors.New("tick failed")
				case "arm":
					return nil, c.StartTimer("t", time.Second, 0, "tick")
				case "ok":
					return "fine", nil
				}
				return nil, errors.New("tell failed")
			}
		}))
	})
	ctx := ctxT(t)
	obs := newObserver(t, s, 1)
	ticked = obs.ID()
	id := grain.NewID("f", "a")
	_, err := s.Ask(ctx, id, "ask fails")
	require.Error(t, err)
	assert.Zero(t, s.Stats().FailedTells, "an ask's caller has its error")
	s.WaitLogged()
	assert.Empty(t, logged.String())

	require.NoError(t, s.Tell(ctx, id, "x"))
	require.NoError(t, s.Tell(ctx, id, "panic"))
	_, err = s.Ask(ctx, id, "arm") // after the two tells: a barrier
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s.Stats().FailedTells)
	clk.Advance(time.Second)
	_, err = obs.Receive(ctx) // the tick's turn runs...
	require.NoError(t, err)
	_, err = s.Ask(ctx, id, "ok") // ...and has finished by the next turn
	require.NoError(t, err)
	assert.Equal(t, uint64(3), s.Stats().FailedTells)

	s.WaitLogged()
	out := logged.String()
	assert.Contains(t, out, `level=WARN msg="granary: a tell's turn failed, with no caller to return the error to" grain=f/a err="tell failed" directive=resume`)
	assert.Contains(t, out, `level=ERROR msg="granary: a tell's turn failed, with no caller to return the error to" grain=f/a`)
	assert.Contains(t, out, "tell boom")
	assert.Contains(t, out, "directive=restart")
	// A panic's line has its stack, from the panic to the handler that made it.
	assert.Regexp(t, `err="granary: grain f/a panicked: tell boom" directive=restart stack="panic\(\.\.\.\)\\n\\t[^"]*\\n`+
		`github.com/granary-go/granary/silo_test\.TestAFailedTellIsLoggedAndCounted\.func1\.1\.1\(\.\.\.\)\\n\\t[^"]*/tellfail_test\.go:\d+\\n`, out)
	assert.Equal(t, 1, strings.Count(out, "stack="), "only a panic's line has a stack")
	assert.Contains(t, out, `msg="granary: a timer tick's turn failed, with no caller to return the error to" grain=f/a err="tick failed"`)
}

// failingTells is a silo whose grains of kind "f" fail every message but
// "ok", logging to logged (or cfg.Logger, for nil), and a function that tells grain f/a n messages
// and waits until their turns are over.
func failingTells(t *testing.T, cfg silo.Config, logged *syncBuffer) (*silo.Silo, func(n int)) {
	if logged != nil { // nil: cfg's Logger
		cfg.Logger = newTextLogger(logged)
	}
	s := newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "f", func(grain.ID) grain.Func {
			return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "ok" {
					return nil, nil
				}
				return nil, errors.New("tell failed")
			}
		}))
	})
	ctx := ctxT(t)
	id := grain.NewID("f", "a")
	return s, func(n int) {
		for range n {
			require.NoError(t, s.Tell(ctx, id, "x"))
		}
		_, err := s.Ask(ctx, id, "ok") // a barrier: the tells' turns are over
		require.NoError(t, err)
		s.WaitLogged() // and their lines written
	}
}

// A storm of failing tells writes a sample, not a line each: the first
// Config.LogSampling.First lines of each tick, the rest counted — in
// FailedTells, in DroppedLogLines, and in the next line written.
func TestAStormOfFailedTellsIsSampled(t *testing.T) {
	var logged syncBuffer
	clk := clock.NewManual(time.Unix(0, 0))
	s, storm := failingTells(t, silo.Config{Clock: clk, LogSampling: silo.LogSampling{First: 3}}, &logged)
	const line = `msg="granary: a tell's turn failed, with no caller to return the error to"`

	storm(20)
	st := s.Stats()
	assert.Equal(t, uint64(20), st.FailedTells)
	assert.Equal(t, uint64(17), st.DroppedLogLines)
	assert.Equal(t, 3, strings.Count(logged.String(), line))
	assert.NotContains(t, logged.String(), "dropped_lines")

	clk.Advance(silo.DefaultLogTick) // a new tick
	storm(5)
	st = s.Stats()
	assert.Equal(t, uint64(25), st.FailedTells)
	assert.Equal(t, uint64(19), st.DroppedLogLines)
	assert.Equal(t, 6, strings.Count(logged.String(), line))
	assert.Equal(t, 1, strings.Count(logged.String(), "dropped_lines=17"), "the first line of the tick counts the storm's drops")
}

// With a negative First every line is written.
func TestLogSamplingCanBeTurnedOff(t *testing.T) {
	var logged syncBuffer
	s, storm := failingTells(t, silo.Config{LogSampling: silo.LogSampling{First: -1}}, &logged)
	storm(50)
	assert.Equal(t, 50, strings.Count(logged.String(), "tell failed"))
	assert.Zero(t, s.Stats().DroppedLogLines)
}

func TestLogSamplingRefusesANegativeTick(t *testing.T) {
	_, err := silo.New(silo.Config{LogSampling: silo.LogSampling{Tick: -time.Second}})
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "LogSampling.Tick")
}

// A silo given no Logger writes its lines to slog.Default() — the one in
// effect as each line is written, so a program that sets its default after
// New still gets them — rather than dropping them: a failed tell would
// otherwise be lost to everyone but Stats.
func TestWithNoLoggerTheSiloLogsToSlogsDefault(t *testing.T) {
	before := slog.Default()
	t.Cleanup(func() { slog.SetDefault(before) })
	var early, late syncBuffer
	slog.SetDefault(newTextLogger(&early))
	s, tellFails := failingTells(t, silo.Config{}, nil)
	tellFails(1)
	assert.Contains(t, early.String(), `msg="granary: a tell's turn failed, with no caller to return the error to" grain=f/a err="tell failed"`)

	slog.SetDefault(newTextLogger(&late))
	require.NoError(t, s.Tell(ctxT(t), grain.NewID("f", "b"), "x"))
	require.NoError(t, s.Shutdown(ctxT(t))) // writes what was logged before it
	assert.Contains(t, late.String(), "grain=f/b")
	assert.NotContains(t, early.String(), "grain=f/b")
}

// A silo given a name says it in every line it logs — two silos of one
// process share slog.Default() unless each is given a Logger — and one
// left with the default name adds nothing to its lines.
func TestANamedSiloNamesItselfInItsLines(t *testing.T) {
	var named, unnamed syncBuffer
	_, tellFails := failingTells(t, silo.Config{Name: "eu-1"}, &named)
	tellFails(1)
	_, tellFails = failingTells(t, silo.Config{}, &unnamed)
	tellFails(1)
	assert.Contains(t, named.String(), `err="tell failed" directive=resume silo=eu-1`)
	assert.Contains(t, unnamed.String(), `err="tell failed" directive=resume`)
	assert.NotContains(t, unnamed.String(), "silo=")
}

// A tell whose turn fails because Close ended its ctx — its handler
// returns the ctx's error — is counted like any, and logged at Debug, not
// Warn: the close ends the turns under way because the program asked it
// to, and 500 grains' timer ticks closed under load gave ten Warn lines of
// it. A failure of its own at that moment still says Warn.
func TestATellThatCloseEndedIsLoggedAtDebug(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(map[bool]string{false: "its ctx's error", true: "an error of its own"}[own], func(t *testing.T) {
			var logged syncBuffer
			in, out := make(chan struct{}, 1), make(chan error, 1)
			log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
			// No handoff while the test lasts: the turn ends on its owner, after Close.
			s := newSilo(t, silo.Config{Logger: log, HandoffThreshold: time.Hour}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "waiter", func(grain.ID) grain.Func {
					w := ctxWaiter{in: in, out: out}
					return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
						_, err := w.Receive(ctx, c, msg)
						if own {
							return nil, errors.New("flush failed")
						}
						return nil, err
					}
				}))
			})
			require.NoError(t, s.Tell(ctxT(t), grain.NewID("waiter", "a"), "wait"))
			<-in
			require.NoError(t, s.Close()) // returns once the lines are written
			require.ErrorIs(t, <-out, context.Canceled)
			assert.Equal(t, uint64(1), s.Stats().FailedTells)
			line := `msg="granary: a tell's turn failed, with no caller to return the error to" grain=waiter/a`
			if own {
				assert.Contains(t, logged.String(), `level=WARN `+line+` err="flush failed"`)
			} else {
				assert.Contains(t, logged.String(), `level=DEBUG `+line+` err="context canceled"`)
				assert.NotContains(t, logged.String(), "level=WARN")
			}
		})
	}
}
