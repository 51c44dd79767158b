package silo_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// fanner calls many grains at once from goroutines of its handler, as
// Orleans code awaits Task.WhenAll, and waits for them all.
type fanner struct{}

type fanOut struct {
	n     int
	allow bool // through AllowCallChainReentrancy
}

func (fanner) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	m, ok := msg.(fanOut)
	if !ok {
		return "interleaved or queued", nil
	}
	if m.allow {
		ctx = silo.AllowCallChainReentrancy(ctx)
	}
	var wg sync.WaitGroup
	errs := make([]error, m.n)
	for i := range m.n {
		wg.Go(func() {
			_, errs[i] = silo.Call[int](ctx, c.Silo(), grain.NewIntID("counter", int64(i)), incr{1})
		})
	}
	wg.Wait()
	return m.n, errors.Join(errs...)
}

// A fan-out of calls from one turn, with other messages to the same grain
// arriving meanwhile: every call is answered, for a plain kind, a reentrant
// kind (whose turn gives its token up while its calls are out, and must
// take it back once, however many there were), and call-chain reentrancy.
// It once deadlocked: two goroutines of one turn both took the token back.
func TestFanOutFromATurn(t *testing.T) {
	for name, c := range map[string]struct {
		opts  []silo.KindOption
		allow bool
	}{
		"plain":                {},
		"reentrant kind":       {opts: []silo.KindOption{silo.WithReentrant()}},
		"call chain reentrant": {allow: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
				require.NoError(t, silo.Register(s, "counter", func(grain.ID) *counter { return &counter{} }))
				require.NoError(t, silo.Register(s, "fan", func(grain.ID) fanner { return fanner{} }, c.opts...))
			})
			ctx := ctxT(t)
			const callers, rounds, width = 4, 10, 32
			var wg sync.WaitGroup
			for k := range callers {
				wg.Go(func() {
					id := grain.NewIntID("fan", int64(k%2))
					for range rounds {
						n, err := silo.Call[int](ctx, s, id, fanOut{n: width, allow: c.allow})
						if !assert.NoError(t, err) {
							return
						}
						assert.Equal(t, width, n)
						_, err = s.Ask(ctx, id, "meanwhile")
						assert.NoError(t, err)
					}
				})
			}
			wg.Wait()
			for i := range width {
				n, err := silo.Call[int](ctx, s, grain.NewIntID("counter", int64(i)), get{})
				require.NoError(t, err)
				assert.Equal(t, callers*rounds, n, "every call of every fan-out reached counter %d once", i)
			}
		})
	}
}
