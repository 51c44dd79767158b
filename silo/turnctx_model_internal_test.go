package silo

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/granary-go/granary/queues"
)

// A turn's ctx keeps the context package's promise whatever ends it and in
// whatever order — its caller's ctx, the caller giving up on it, the silo's
// default call timeout, a give-up on its hook, the silo's close, its
// turn's end — and whenever its handler (or a goroutine that kept it)
// looks: once Err has said an error it says the same one for good, and Done
// is closed exactly when Err says one. Each step sequence is one ctx, an
// ask's or an OnActivate's, driven from one goroutine as the silo would:
// the caller gives up only once its ctx has ended, and the turn ends once.
// Before, a ctx timed out or given up on, then ended by its turn, said
// DeadlineExceeded and then Canceled.
func TestATurnCtxSaysOneErrorForGood(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		base, endBase := context.WithCancel(context.Background())
		defer endBase()
		p := &partition{base: base}
		caller := &endable{done: make(chan struct{})}
		endCaller := caller.end

		c := &turnCtx{home: p}
		isAsk := rapid.Bool().Draw(rt, "an ask's (else a hook's)")
		if isAsk {
			c.parent = caller
			c.info.req = queues.NewRequest(caller, nil)
		} else {
			c.hook = true
			if rapid.Bool().Draw(rt, "its first message an ask's") {
				c.parent = context.WithoutCancel(caller) // as partition.hookCtx
				c.info.req = queues.NewRequest(caller, nil)
			} else {
				c.parent = base
			}
		}

		var said error // the first error Err said
		var done <-chan struct{}
		callerEnded, gone, over := false, false, false
		check := func(step string) {
			err := c.Err()
			if said != nil && !errors.Is(err, said) {
				rt.Fatalf("after %s: Err says %v, having said %v", step, err, said)
			}
			if said == nil {
				said = err
			}
			if done != nil {
				select {
				case <-done:
					if err == nil {
						rt.Fatalf("after %s: Done closed, Err nil", step)
					}
				default:
					if err != nil {
						rt.Fatalf("after %s: Err %v, Done open", step, err)
					}
				}
			}
		}
		steps := rapid.SliceOfN(rapid.SampledFrom([]string{
			"caller's ctx ends", "caller gives up", "call timeout", "silo closes", "turn ends", "Err", "Done",
		}), 1, 12).Draw(rt, "steps")
		for _, step := range steps {
			switch step {
			case "caller's ctx ends":
				if !callerEnded {
					callerEnded = true
					endCaller(rapid.SampledFrom([]error{context.Canceled, context.DeadlineExceeded}).Draw(rt, "its error"))
				}
			case "caller gives up": // once it sees its ctx end, as it waits
				if isAsk && callerEnded && !gone {
					gone = true
					c.callerGone()
				}
			case "call timeout": // the silo's default, or a hook given up on
				if !gone {
					gone = true
					c.timeOut()
				}
			case "silo closes":
				endBase()
				p.live.end()
			case "turn ends":
				if !over {
					over = true
					c.release()
				}
			case "Err":
				check(step)
			case "Done":
				if done == nil {
					done = c.Done()
				}
			}
			if said != nil || done != nil {
				check(step) // the handler has looked: it must not change
			}
		}
		check("the last step")
	})
}

// endable is a caller's ctx that ends with the error end gives it: its
// deadline's, or a cancel's (a context.WithTimeout cannot be made to pass
// its deadline at a step of the test's choosing).
type endable struct {
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func (e *endable) end(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
	close(e.done)
}

func (e *endable) Deadline() (time.Time, bool) { return time.Time{}, false }
func (e *endable) Done() <-chan struct{}       { return e.done }
func (e *endable) Value(any) any               { return nil }
func (e *endable) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
