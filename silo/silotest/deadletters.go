package silotest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/granary-go/granary/silo"
)

// DeadLetterLog records a silo's dead letters for a test. A dead letter
// published before a call to All or ExpectNone — before an ask's caller got
// its error, or a refused Tell its ErrOverloaded — is seen by it.
//
// A DeadLetterLog belongs to the test's goroutine. Its subscription ends
// with the test.
type DeadLetterLog struct {
	t    testing.TB
	sub  *silo.DeadLetters
	seen []silo.DeadLetter
}

// RecordDeadLetters starts recording s's dead letters (up to logBuffer
// between two reads; more are counted as dropped, and ExpectNone fails on
// them too).
func RecordDeadLetters(t testing.TB, s *silo.Silo) *DeadLetterLog {
	t.Helper()
	l := &DeadLetterLog{t: t, sub: s.SubscribeDeadLetters(logBuffer)}
	t.Cleanup(l.sub.Cancel)
	return l
}

// NoDeadLetters records s's dead letters, and fails the test when it ends
// if there was any: for a test whose every message must be handled.
func NoDeadLetters(t testing.TB, s *silo.Silo) *DeadLetterLog {
	t.Helper()
	l := RecordDeadLetters(t, s)
	t.Cleanup(l.ExpectNone) // before the subscription's Cancel: cleanups run last first
	return l
}

// logBuffer is how many dead letters a log holds between two reads: more
// than a test's failures, less than the silo's largest (a channel of
// silo.MaxDeadLetterBuffer letters is megabytes).
const logBuffer = 4096

// All returns every dead letter recorded so far, in the order published.
func (l *DeadLetterLog) All() []silo.DeadLetter {
	for {
		select {
		case d, ok := <-l.sub.C:
			if !ok {
				return l.seen
			}
			l.seen = append(l.seen, d)
		default:
			return l.seen
		}
	}
}

// ExpectNone fails the test if any dead letter was recorded, listing them.
func (l *DeadLetterLog) ExpectNone() {
	l.t.Helper()
	all := l.All()
	if len(all) == 0 && l.sub.Dropped() == 0 {
		return
	}
	var b strings.Builder
	for _, d := range all {
		from := "(outside any grain)"
		if !d.Sender.IsZero() {
			from = d.Sender.String()
		}
		fmt.Fprintf(&b, "\n\t%s → %v: %#v (%v)", from, d.Target, d.Msg, d.Reason)
		if d.Err != nil {
			fmt.Fprintf(&b, ": %v", d.Err)
		}
	}
	if n := l.sub.Dropped(); n > 0 {
		fmt.Fprintf(&b, "\n\tand %d more not recorded", n)
	}
	l.t.Errorf("silotest: dead letters (%d), where none was expected:%s", len(all)+int(l.sub.Dropped()), b.String())
}
