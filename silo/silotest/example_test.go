package silotest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/silo/silotest"
)

// Room is the grain under test: a chat room that relays each line said in
// it to its members.
type Room struct{ members []grain.ID }

type (
	Join struct{ Member grain.ID }
	Say  struct{ Text string }
	Line struct{ Room, Text string }
)

func (r *Room) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case Join:
		r.members = append(r.members, m.Member)
		return len(r.members), nil
	case Say:
		for _, id := range r.members {
			if err := gc.Silo().Tell(ctx, id, Line{Room: gc.ID().Key(), Text: m.Text}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("room: unexpected %T", msg)
}

// roomTest is a test as it would be written in a _test.go file, there as
// func TestRoomRelaysToItsMembers(t *testing.T). Two probes join a room;
// a line said in it reaches both, and nothing else does.
func roomTest(t testing.TB) {
	s := silotest.Start(t, silo.Config{}, func(s *silo.Silo) error {
		return silo.Register(s, "room", func(grain.ID) *Room { return &Room{} })
	})
	silotest.NoDeadLetters(t, s) // checked when the test ends
	alice, bob := silotest.NewProbe(t, s), silotest.NewProbe(t, s)
	lobby := grain.NewID("room", "lobby")
	for _, p := range []*silotest.Probe{alice, bob} {
		if _, err := s.Ask(t.Context(), lobby, Join{Member: p.ID()}); err != nil {
			t.Fatalf("join: %v", err)
		}
	}
	if err := s.Tell(t.Context(), lobby, Say{Text: "hello"}); err != nil {
		t.Fatalf("say: %v", err)
	}
	// Each Expect wakes the test as the line arrives: no sleep, no polling.
	alice.Expect(Line{Room: "lobby", Text: "hello"})
	if got := silotest.ExpectType[Line](bob); got.Text != "hello" {
		t.Errorf("bob heard %q", got.Text)
	}
	bob.ExpectNone(10 * time.Millisecond)
}

// A test of a grain, with a probe for each member of a chat room. Here the
// test runs under a stand-in for go test's *testing.T, so that the example
// can show its outcome; in a _test.go file it is an ordinary test.
func Example() {
	fmt.Println(runAsTest(roomTest))
	// Output: PASS
}

// runAsTest runs test as go test would — on a goroutine of its own, then
// its cleanups, last first — and says how it went.
func runAsTest(test func(testing.TB)) string {
	t := &standInT{}
	var cancel context.CancelFunc
	t.ctx, cancel = context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		test(t)
	}()
	<-done
	cancel() // as t.Context() is, before the cleanups run
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	if len(t.failures) > 0 {
		return "FAIL: " + strings.Join(t.failures, "; ")
	}
	return "PASS"
}

// standInT is the part of *testing.T a silotest test uses. The embedded
// interface is nil: a method not defined here would panic.
type standInT struct {
	testing.TB
	ctx      context.Context
	cleanups []func()
	failures []string
}

func (t *standInT) Helper()                  {}
func (t *standInT) Log(...any)               {} // the silo's log: shown only for a failed test
func (t *standInT) Context() context.Context { return t.ctx }
func (t *standInT) Cleanup(f func())         { t.cleanups = append(t.cleanups, f) }
func (t *standInT) Errorf(f string, args ...any) {
	t.failures = append(t.failures, fmt.Sprintf(f, args...))
}
func (t *standInT) Fatalf(f string, args ...any) {
	t.Errorf(f, args...)
	runtime.Goexit() // as t.FailNow: the test's goroutine ends here
}
