package silo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/queues"
	"github.com/granary-go/granary/silo"
)

// traceProp carries the trace id under traceKey.
var traceProp = valuePropagator[string](traceKey{})

// valuePropagator carries the ctx value of type V under key.
func valuePropagator[V any](key any) silo.PropagatorFuncs {
	return silo.PropagatorFuncs{
		ExtractFunc: func(ctx context.Context) any {
			if v, ok := ctx.Value(key).(V); ok {
				return v
			}
			return nil
		},
		InjectFunc: func(ctx context.Context, carried any) context.Context {
			return context.WithValue(ctx, key, carried)
		},
	}
}

// tracer reports the trace id its handler's ctx has, and its sender, then
// passes the message on to the next grain if there is one.
type tracer struct{ seen chan<- string }

type (
	pass     struct{ next []grain.ID }
	askFirst struct{ id grain.ID }
)

func (g *tracer) Receive(ctx context.Context, gc *grain.Context, msg any) (any, error) {
	trace, _ := ctx.Value(traceKey{}).(string)
	from := "outside"
	if s, ok := gc.Sender(); ok {
		from = s.Key()
	}
	switch m := msg.(type) {
	case pass:
		g.seen <- gc.ID().Key() + " from " + from + ": " + trace
		if len(m.next) > 0 { // a tell from the turn, with the turn's ctx
			return nil, gc.Silo().Tell(ctx, m.next[0], pass{next: m.next[1:]})
		}
	case askFirst: // the handler's ctx still is the turn's: a call cycle is caught
		return gc.Silo().Ask(ctx, m.id, askFirst{id: gc.ID()})
	}
	return nil, nil
}

func propSilo(t *testing.T, cfg silo.Config, seen chan string, opts ...silo.KindOption) *silo.Silo {
	t.Helper()
	if cfg.Propagator == nil {
		cfg.Propagator = traceProp
	}
	return newSilo(t, cfg, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) *tracer { return &tracer{seen: seen} }, opts...))
	})
}

// A Tell carries what the propagator extracts from its ctx to the turn that
// handles it, and on through the tells that turn makes with its own ctx;
// the filters see it too, and the turn's ctx is still the silo's.
func TestPropagatorCarriesATellsValues(t *testing.T) {
	seen := make(chan string, 8)
	filtered := make(chan string, 8)
	meter := grain.FilterFunc(func(ctx context.Context, gc *grain.Context, msg any, next grain.Grain) (any, error) {
		trace, _ := ctx.Value(traceKey{}).(string)
		filtered <- trace
		return next.Receive(ctx, gc, msg)
	})
	s := propSilo(t, silo.Config{Filters: []grain.Filter{meter}}, seen)
	ctx := context.WithValue(ctxT(t), traceKey{}, "trace-1")
	b, c := grain.NewID("relay", "b"), grain.NewID("relay", "c")
	require.NoError(t, s.Tell(ctx, grain.NewID("relay", "a"), pass{next: []grain.ID{b, c}}))
	assert.Equal(t, "a from outside: trace-1", <-seen)
	assert.Equal(t, "b from a: trace-1", <-seen, "a tell from a turn carries it on, with the sender")
	assert.Equal(t, "c from b: trace-1", <-seen)
	assert.Equal(t, []string{"trace-1", "trace-1", "trace-1"}, []string{<-filtered, <-filtered, <-filtered})

	// Nothing extracted, nothing carried.
	require.NoError(t, s.Tell(ctxT(t), grain.NewID("relay", "d"), pass{}))
	assert.Equal(t, "d from outside: ", <-seen)
	assert.Equal(t, "", <-filtered)

	// The injected ctx is still the turn's: a call from it is a call from
	// the grain, and a call back into the caller is a cycle.
	_, err := s.Ask(ctxT(t), grain.NewID("relay", "e"), askFirst{id: grain.NewID("relay", "f")})
	require.ErrorIs(t, err, grain.ErrCallCycle)
}

// Without a propagator, a tell's handler sees none of its sender's values.
func TestWithoutAPropagatorATellCarriesNothing(t *testing.T) {
	seen := make(chan string, 1)
	s := propSilo(t, silo.Config{Propagator: silo.PropagatorFuncs{
		ExtractFunc: func(context.Context) any { return nil },
		InjectFunc:  func(ctx context.Context, _ any) context.Context { return ctx },
	}}, seen)
	require.NoError(t, s.Tell(context.WithValue(ctxT(t), traceKey{}, "x"), grain.NewID("relay", "a"), pass{}))
	assert.Equal(t, "a from outside: ", <-seen)

	plain := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) *tracer { return &tracer{seen: seen} }))
	})
	require.NoError(t, plain.Tell(context.WithValue(ctxT(t), traceKey{}, "x"), grain.NewID("relay", "a"), pass{}))
	assert.Equal(t, "a from outside: ", <-seen)
}

// An Extract that panics carries nothing and fails no send; an Inject that
// panics, or returns nil, fails the turn as its handler would.
func TestPropagatorFailures(t *testing.T) {
	seen := make(chan string, 4)
	failed := make(chan error, 4)
	logged := &syncBuffer{}
	s := propSilo(t, silo.Config{
		Logger: newTextLogger(logged),
		Propagator: silo.PropagatorFuncs{
			ExtractFunc: func(ctx context.Context) any {
				switch v := ctx.Value(traceKey{}); v {
				case "panic":
					panic("extract")
				case nil:
					return nil
				default:
					return v
				}
			},
			InjectFunc: func(ctx context.Context, carried any) context.Context {
				switch carried {
				case "panic in inject":
					panic("inject")
				case "nil":
					return nil // the failure under test
				}
				return context.WithValue(ctx, traceKey{}, carried)
			},
		},
	}, seen, silo.WithSupervision(activation.Supervision{Decider: activation.DeciderFunc(func(_ grain.ID, err error) activation.Directive {
		failed <- err
		return activation.Resume
	})}))
	with := func(v string) context.Context { return context.WithValue(ctxT(t), traceKey{}, v) }

	require.NoError(t, s.Tell(with("panic"), grain.NewID("relay", "a"), pass{}))
	assert.Equal(t, "a from outside: ", <-seen)
	s.WaitLogged()
	assert.Contains(t, logged.String(), "ContextPropagator.Extract panicked")

	require.NoError(t, s.Tell(with("panic in inject"), grain.NewID("relay", "a"), pass{}))
	var pe *grain.PanicError
	require.ErrorAs(t, <-failed, &pe)
	assert.Equal(t, "inject", pe.Value)

	require.NoError(t, s.Tell(with("nil"), grain.NewID("relay", "a"), pass{}))
	assert.ErrorContains(t, <-failed, "Inject returned a nil context")

	require.NoError(t, s.Tell(with("fine"), grain.NewID("relay", "a"), pass{}))
	assert.Equal(t, "a from outside: fine", <-seen, "the grain went on")
}

// refuser is a grain that cannot be activated.
type refuser struct{}

func (refuser) Receive(context.Context, *grain.Context, any) (any, error) { return nil, nil }
func (refuser) OnActivate(context.Context, *grain.Context) error {
	return errors.New("refused")
}

// A dead letter names what its Tell carried, with its message unwrapped.
func TestADeadLetterKeepsWhatItsTellCarried(t *testing.T) {
	s := newSilo(t, silo.Config{Propagator: traceProp}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "refuser", func(grain.ID) refuser { return refuser{} }))
	})
	dl := s.SubscribeDeadLetters(4)
	require.NoError(t, s.Tell(context.WithValue(ctxT(t), traceKey{}, "t-9"), grain.NewID("refuser", "a"), "hello"))
	d := <-dl.C
	assert.Equal(t, grain.ReasonActivationFailed, d.Reason)
	assert.Equal(t, "hello", d.Msg)
	assert.Equal(t, "t-9", d.Carried)
}

func TestPropagatorConfig(t *testing.T) {
	for _, p := range []silo.ContextPropagator{
		silo.PropagatorFuncs{},
		silo.PropagatorFuncs{ExtractFunc: traceProp.ExtractFunc},
		(*silo.PropagatorFuncs)(nil),
	} {
		_, err := silo.New(silo.Config{Propagator: p})
		require.ErrorIs(t, err, grain.ErrInvalidConfig, "%#v", p)
		assert.ErrorContains(t, err, "Propagator")
	}
	s, err := silo.New(silo.Config{Propagator: &traceProp})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// A message that carries something reaches a silo without a propagator —
// from a transport, say: its handler gets the message itself, unwrapped.
func TestACarryingMessageWithoutAPropagator(t *testing.T) {
	got := make(chan any, 1)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "plain", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				got <- msg
				return nil, nil
			}
		}))
	})
	require.NoError(t, s.Tell(ctxT(t), grain.NewID("plain", "a"), &queues.Carrying{Msg: "hello", Carried: "span"}))
	assert.Equal(t, "hello", <-got)
}

// loader is a grain whose OnActivate reports the trace id its ctx has, as a
// load of its state traced under its first message's span would.
type loader struct {
	tracer
	hooked chan<- string
}

func (g *loader) OnActivate(ctx context.Context, gc *grain.Context) error {
	trace, _ := ctx.Value(traceKey{}).(string)
	g.hooked <- gc.ID().Key() + ": " + trace
	if trace == "refuse" {
		return errors.New("refused")
	}
	return nil
}

// A grain activated by a tell runs OnActivate under the values its tell
// carried, as one activated by an ask runs it under its caller's; an Inject
// that fails, fails the activation.
func TestAnActivationHasTheValuesItsTellCarried(t *testing.T) {
	seen, hooked := make(chan string, 4), make(chan string, 4)
	s := newSilo(t, silo.Config{Propagator: silo.PropagatorFuncs{
		ExtractFunc: traceProp.ExtractFunc,
		InjectFunc: func(ctx context.Context, carried any) context.Context {
			if carried == "panic" {
				panic("inject")
			}
			return context.WithValue(ctx, traceKey{}, carried)
		},
	}}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "loader", func(grain.ID) *loader {
			return &loader{tracer: tracer{seen: seen}, hooked: hooked}
		}))
	})
	dl := s.SubscribeDeadLetters(4)
	with := func(v string) context.Context { return context.WithValue(ctxT(t), traceKey{}, v) }

	require.NoError(t, s.Tell(with("t-1"), grain.NewID("loader", "a"), pass{}))
	assert.Equal(t, "a: t-1", <-hooked)
	assert.Equal(t, "a from outside: t-1", <-seen)

	_, err := s.Ask(with("t-2"), grain.NewID("loader", "b"), pass{})
	require.NoError(t, err)
	assert.Equal(t, "b: t-2", <-hooked)
	assert.Equal(t, "b from outside: t-2", <-seen)

	require.NoError(t, s.Tell(ctxT(t), grain.NewID("loader", "c"), pass{}))
	assert.Equal(t, "c: ", <-hooked, "nothing carried, nothing injected")
	assert.Equal(t, "c from outside: ", <-seen)

	require.NoError(t, s.Tell(with("panic"), grain.NewID("loader", "d"), pass{}))
	var d silo.DeadLetter
	select {
	case d = <-dl.C:
	case <-ctxT(t).Done():
		t.Fatal("no dead letter for the tell whose activation failed")
	}
	assert.Equal(t, grain.ReasonActivationFailed, d.Reason)
	var pe *grain.PanicError
	require.ErrorAs(t, d.Err, &pe)
	assert.Equal(t, "inject", pe.Value)
	assert.Empty(t, hooked, "the hook did not run")
}

// tenantProp is a program's own ContextPropagator type, as a tracing
// library's adapter would be: not PropagatorFuncs.
type tenantProp struct{ injected *atomic.Int64 }

func (p *tenantProp) Extract(ctx context.Context) any {
	if v, ok := ctx.Value(traceKey{}).(string); ok {
		return "tenant:" + v
	}
	return nil
}

func (p *tenantProp) Inject(ctx context.Context, carried any) context.Context {
	p.injected.Add(1)
	return context.WithValue(ctx, traceKey{}, carried)
}

// A propagator of the program's own type carries a tell's values as
// PropagatorFuncs does; a nil pointer of that type is refused at New, as a
// nil PropagatorFuncs is (its methods would run on nil at the first tell).
func TestAPropagatorOfTheProgramsOwnType(t *testing.T) {
	_, err := silo.New(silo.Config{Propagator: (*tenantProp)(nil)})
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.ErrorContains(t, err, "Propagator")

	var injected atomic.Int64
	seen := make(chan string, 2)
	s := propSilo(t, silo.Config{Propagator: &tenantProp{injected: &injected}}, seen)
	ctx := context.WithValue(ctxT(t), traceKey{}, "acme")
	require.NoError(t, s.Tell(ctx, grain.NewID("relay", "a"), pass{next: []grain.ID{grain.NewID("relay", "b")}}))
	assert.Equal(t, "a from outside: tenant:acme", <-seen)
	assert.Equal(t, "b from a: tenant:tenant:acme", <-seen, "extracted again from the turn's ctx, as it was injected")
	assert.Equal(t, int64(4), injected.Load(), "each tell activated its grain: OnActivate's ctx and the handler's")
}
