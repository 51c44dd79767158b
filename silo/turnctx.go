package silo

import (
	"context"
	"sync"
	"time"

	"github.com/granary-go/granary/queues"
)

// turnKey is the context key of the running turn.
type turnKey struct{}

// turnInfo is what a turn's ctx tells the silo's send path: which activation
// is calling (the sender), the call chain it extends, and the worker to hand
// the partition off from before it blocks.
type turnInfo struct {
	a     *act
	chain queues.Chain
	w     *worker
	// holdsToken: the turn holds a.token. Interleaved turns take it at
	// their start; an ordinary turn only once it comes back from a call
	// that let others interleave. Turns never interleaved never touch it.
	holdsToken bool
}

// turnFrom returns the turn ctx runs in, or nil outside any turn.
func turnFrom(ctx context.Context) *turnInfo {
	ti, _ := ctx.Value(turnKey{}).(*turnInfo)
	return ti
}

// turnCtx is the context.Context a handler receives. It is cancelled when the
// caller's ctx is (for an ask) or when the silo closes, and it carries the
// turn. One lives in each worker and is reset for every turn, so a turn costs
// no allocation; the merged Done channel is made only if the handler asks for
// it while both sources can cancel.
type turnCtx struct {
	parent context.Context // the ask's ctx or the hook's deadline; nil for a tell
	base   context.Context // the silo's lifetime
	info   turnInfo

	mu   sync.Mutex
	done chan struct{}
	err  error
	stop [2]func() bool
}

func (c *turnCtx) reset(parent, base context.Context, info turnInfo) {
	c.parent, c.base, c.info = parent, base, info
}

// release detaches the merged Done channel, if one was made, from its
// sources. Called when the turn ends.
func (c *turnCtx) release() {
	if c.done == nil {
		return
	}
	for i, f := range c.stop {
		if f != nil {
			f()
			c.stop[i] = nil
		}
	}
	c.mu.Lock()
	c.done, c.err = nil, nil
	c.mu.Unlock()
}

func (c *turnCtx) Deadline() (time.Time, bool) {
	if c.parent != nil {
		return c.parent.Deadline()
	}
	return time.Time{}, false
}

func (c *turnCtx) Done() <-chan struct{} {
	if c.parent == nil || c.parent.Done() == nil {
		return c.base.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		done := make(chan struct{})
		c.done = done
		var once sync.Once
		cancel := func(src context.Context) func() {
			return func() {
				once.Do(func() {
					c.mu.Lock()
					c.err = src.Err()
					c.mu.Unlock()
					close(done)
				})
			}
		}
		c.stop[0] = context.AfterFunc(c.parent, cancel(c.parent))
		c.stop[1] = context.AfterFunc(c.base, cancel(c.base))
	}
	return c.done
}

func (c *turnCtx) Err() error {
	c.mu.Lock()
	made, err := c.done != nil, c.err
	c.mu.Unlock()
	if made {
		return err
	}
	if c.parent != nil {
		if err := c.parent.Err(); err != nil {
			return err
		}
	}
	return c.base.Err()
}

func (c *turnCtx) Value(key any) any {
	if key == (turnKey{}) {
		return &c.info
	}
	if c.parent != nil {
		return c.parent.Value(key)
	}
	return c.base.Value(key)
}
