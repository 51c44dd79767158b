package activation

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/grain"
)

// Run runs one turn of g: Receive(ctx, c, msg). A panic is recovered and
// returned as a *grain.PanicError carrying the value and the stack, so a
// grain can never kill the goroutine that runs it; a typed nil returned as
// the error is replaced by one that matches grain.ErrTypedNil (CheckError).
func Run(ctx context.Context, g grain.Grain, c *grain.Context, msg any) (reply any, err error) {
	// recover only for a turn that did not return: called for every turn,
	// it cost each a call into the runtime. (recover works only called by
	// the deferred function itself, hence no helper.)
	returned := false
	defer func() {
		if !returned {
			if v := recover(); v != nil {
				err = grain.Recovered(c.ID(), v)
			}
		}
	}()
	reply, err = g.Receive(ctx, c, msg)
	returned = true
	if err != nil {
		err = CheckError(c.ID(), err)
	}
	return reply, err
}

// Activate runs g's OnActivate, if it has one, with the same panic recovery
// and check of its error.
func Activate(ctx context.Context, g grain.Grain, c *grain.Context) (err error) {
	a, ok := g.(grain.Activator)
	if !ok {
		return nil
	}
	defer recoverTurn(c, &err)
	return CheckError(c.ID(), a.OnActivate(ctx, c))
}

// Deactivate runs g's OnDeactivate, if it has one, with the same panic
// recovery and check of its error.
func Deactivate(ctx context.Context, g grain.Grain, c *grain.Context) (err error) {
	d, ok := g.(grain.Deactivator)
	if !ok {
		return nil
	}
	defer recoverTurn(c, &err)
	return CheckError(c.ID(), d.OnDeactivate(ctx, c))
}

// Build calls a kind's factory with panic recovery, and rejects a nil grain.
func Build(id grain.ID, factory func(grain.ID) grain.Grain) (g grain.Grain, err error) {
	if factory == nil {
		return nil, fmt.Errorf("%w: nil factory for %v", grain.ErrInvalidConfig, id)
	}
	defer recoverInto(id, &err)
	g = factory(id)
	if g == nil {
		return nil, errNilGrain
	}
	return g, nil
}

// recoverTurn takes the Context, not the ID, so that deferring it copies
// nothing on the hot path.
func recoverTurn(c *grain.Context, err *error) {
	if v := recover(); v != nil {
		*err = grain.Recovered(c.ID(), v)
	}
}

func recoverInto(id grain.ID, err *error) {
	if v := recover(); v != nil {
		*err = grain.Recovered(id, v)
	}
}
