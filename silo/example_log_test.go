package silo_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// What no caller can hear of — a tell whose turn failed, a tell that
// became a dead letter — goes to Config.Logger, a storm of it sampled:
// here the first two lines a second of each message, the rest counted.
func ExampleLogSampling() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	s, _ := silo.New(silo.Config{Logger: logger, LogSampling: silo.LogSampling{First: 2}})
	_ = silo.Register(s, "sensor", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) {
			if reading, ok := msg.(int); ok && reading < 0 {
				return nil, fmt.Errorf("reading %d out of range", reading)
			}
			return nil, nil
		}
	})
	_ = s.Start()
	ctx := context.Background()
	id := grain.NewID("sensor", "s1")

	for i := range 5 {
		_ = s.Tell(ctx, id, -1-i) // each turn fails, with no caller to tell
	}
	_, err := s.Ask(ctx, id, 0) // a barrier: the five turns are over
	// The silo writes its lines on a goroutine of its own, so that a slow
	// Logger holds up no grain; Shutdown and Close return once they are out.
	_ = s.Shutdown(ctx)
	fmt.Println("ask:", err, "failed tells:", s.Stats().FailedTells, "lines dropped:", s.Stats().DroppedLogLines)
	// Output:
	// level=WARN msg="granary: a tell's turn failed, with no caller to return the error to" grain=sensor/s1 err="reading -1 out of range" directive=resume
	// level=WARN msg="granary: a tell's turn failed, with no caller to return the error to" grain=sensor/s1 err="reading -2 out of range" directive=resume
	// ask: <nil> failed tells: 5 lines dropped: 3
}
