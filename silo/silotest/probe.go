package silotest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Probe is an observer for a test (Akka's TestProbe): give grains its ID,
// and Receive or Expect what they tell it. Each wait is bounded by Timeout
// — a bound for a failing test, never a sleep — and fails the test with
// what was, or was not, received. Probes buffer 1024 notifications; one
// that overflows shows as a dead letter, reason overload.
//
// A Probe belongs to the test's goroutine. It closes when the test ends.
type Probe struct {
	// Timeout bounds each wait; DefaultTimeout when zero. In a
	// testing/synctest bubble it is on the bubble's clock, which jumps to
	// the next event once everything waits: a wait for what is due later
	// than Timeout — a grain going idle after 30 minutes — fails at once,
	// so set it past what the test waits for.
	Timeout time.Duration

	t   testing.TB
	obs *silo.Observer
}

// NewProbe returns a probe on s; failing to make one fails the test.
func NewProbe(t testing.TB, s *silo.Silo) *Probe {
	t.Helper()
	obs, err := s.NewObserver(1024)
	if err != nil {
		t.Fatalf("silotest: NewProbe: %v", err)
	}
	t.Cleanup(obs.Close)
	return &Probe{t: t, obs: obs}
}

// ID returns the probe's address, for grains to tell.
func (p *Probe) ID() grain.ID { return p.obs.ID() }

func (p *Probe) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// Receive waits for the next notification and returns it; it fails the
// test if none comes within Timeout, or the probe is closed (its silo
// stopped, and nothing left to read).
func (p *Probe) Receive() silo.Notification {
	p.t.Helper()
	n, err := p.receive(p.timeout())
	if err != nil {
		p.t.Fatalf("silotest: probe %v: %v", p.ID(), err)
	}
	return n
}

// Expect receives the next notification, and fails the test unless its
// message is want (reflect.DeepEqual). It returns the notification, for
// its sender.
func (p *Probe) Expect(want any) silo.Notification {
	p.t.Helper()
	n, err := p.receive(p.timeout())
	if err != nil {
		p.t.Fatalf("silotest: probe %v expected %#v: %v", p.ID(), want, err)
	}
	if !reflect.DeepEqual(n.Msg, want) {
		p.t.Fatalf("silotest: probe %v expected %#v, got %#v (%s)", p.ID(), want, n.Msg, from(n))
	}
	return n
}

// ReceiveN waits for the next n notifications and returns them in order;
// it fails the test, saying how many came, if they do not all come within
// Timeout each.
func (p *Probe) ReceiveN(n int) []silo.Notification {
	p.t.Helper()
	got := make([]silo.Notification, 0, max(n, 0))
	for len(got) < n {
		x, err := p.receive(p.timeout())
		if err != nil {
			p.t.Fatalf("silotest: probe %v expected %d notifications, got %d: %v", p.ID(), n, len(got), err)
		}
		got = append(got, x)
	}
	return got
}

// ExpectType receives the probe's next notification and returns its
// message as a T (Akka's expectMsgType), for assertions on its fields; it
// fails the test if the message is of another type, or none comes within
// the probe's Timeout. A function, not a method: Go methods take no type
// parameters.
func ExpectType[T any](p *Probe) T {
	p.t.Helper()
	n, err := p.receive(p.timeout())
	if err != nil {
		p.t.Fatalf("silotest: probe %v expected a message of type %v: %v", p.ID(), reflect.TypeFor[T](), err)
	}
	m, ok := n.Msg.(T)
	if !ok {
		p.t.Fatalf("silotest: probe %v expected a message of type %v, got %#v (%s)", p.ID(), reflect.TypeFor[T](), n.Msg, from(n))
	}
	return m
}

// ExpectNone fails the test if a notification comes within d. Unlike the
// other waits, a passing ExpectNone takes all of d: use a short one, or a
// testing/synctest bubble, whose clock is fake.
func (p *Probe) ExpectNone(d time.Duration) {
	p.t.Helper()
	n, err := p.receive(d)
	switch {
	case err == nil:
		p.t.Fatalf("silotest: probe %v expected nothing, got %#v (%s)", p.ID(), n.Msg, from(n))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, grain.ErrObserverClosed):
	default:
		p.t.Fatalf("silotest: probe %v: %v", p.ID(), err)
	}
}

func (p *Probe) receive(d time.Duration) (silo.Notification, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	n, err := p.obs.Receive(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return n, fmt.Errorf("nothing within %v: %w", d, err)
	}
	return n, err
}

// from says who sent n, for a failure's message: a grain, or no grain.
func from(n silo.Notification) string {
	if n.Sender.IsZero() {
		return "sent from outside any grain"
	}
	return "from " + n.Sender.String()
}
