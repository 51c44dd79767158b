package silo_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// Cycles that pass through a turn let in beside a waiting one: the grain
// lets the ask in, but the ask's turn, once running, waits on calls of its
// own, and the ask is answered only when they are. Found by the chaos
// program (bench/chaos): every call of such a cycle waited for its
// deadline, the walk taking a call let in for one that would be answered.

// A reentrant grain in the middle: a's turn calls r, reentrant, whose turn
// calls b; b's turn, on another chain, calls a. r lets anything in, but
// a's call runs in r and waits on b, which waits on a.
func TestACycleThroughATurnOfAReentrantGrainFailsFast(t *testing.T) {
	a, b, r := grain.NewID("hold", "a"), grain.NewID("hold", "b"), grain.NewID("re", "r")
	in := map[grain.ID]chan struct{}{a: make(chan struct{}, 1), b: make(chan struct{}, 1)}
	gate := map[grain.ID]chan struct{}{a: make(chan struct{}), b: make(chan struct{})}
	next := map[grain.ID]grain.ID{a: r, b: a}
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hold", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "hi from " + id.Key(), nil
				}
				in[id] <- struct{}{}
				<-gate[id]
				return silo.Call[string](ctx, s, next[id], "hi")
			}
		}))
		require.NoError(t, silo.Register(s, "re", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				return silo.Call[string](ctx, s, b, "hi") // behind b's turn
			}
		}, silo.WithReentrant()))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromA, fromB := askAsync(ctx, s, a, "go"), askAsync(ctx, s, b, "go")
	<-in[a]
	<-in[b]
	close(gate[a])       // a calls r, whose turn calls b
	waitBacklog(t, s, 1) // r's call waits behind b's turn
	close(gate[b])       // b calls a: the cycle closes
	requireCycle(t, <-fromB, b, a, r, b)
	require.NoError(t, <-fromA, "a's call to r answered once b's turn had ended")
}

// A call back on its own chain in the middle: x's turn calls y, letting
// its chain back in; y calls x back, and that turn, running beside x's,
// calls z; z's turn, on another chain, calls y, which waits on x's turn
// let in, which waits on z.
func TestACycleThroughACallBackOnItsChainFailsFast(t *testing.T) {
	x, y, z := grain.NewID("hold", "x"), grain.NewID("hold", "y"), grain.NewID("hold", "z")
	zIn, zGate := make(chan struct{}, 1), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hold", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch {
				case msg == "hi":
					return "hi from " + id.Key(), nil
				case id == x && msg == "go":
					return silo.Call[string](silo.AllowCallChainReentrancy(ctx), s, y, "back")
				case id == y:
					return silo.Call[string](ctx, s, x, "on")
				case id == x: // "on", y's call back, beside x's turn
					return silo.Call[string](ctx, s, z, "hi") // behind z's turn
				}
				zIn <- struct{}{}
				<-zGate
				return silo.Call[string](ctx, s, y, "hi")
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromZ := askAsync(ctx, s, z, "go")
	<-zIn
	fromX := askAsync(ctx, s, x, "go")
	waitBacklog(t, s, 1) // x's turn let in calls z, behind z's turn
	close(zGate)         // z calls y: the cycle closes
	requireCycle(t, <-fromZ, z, y, x, z)
	require.NoError(t, <-fromX, "x's chain answered once z's turn had ended")
}

// A fan-out into a chain that waits on the fan-out's grain (found by the
// chaos program): c3's turn calls p3, which calls c1, which calls p1 —
// each call letting its chain back into its caller — behind p1's turn,
// which calls c1 and c3 at once and waits for both.
func TestAFanOutIntoAChainThatWaitsOnItFailsFast(t *testing.T) {
	c3, p3, c1, p1 := grain.NewID("g", "c3"), grain.NewID("g", "p3"), grain.NewID("g", "c1"), grain.NewID("g", "p1")
	next := map[grain.ID]grain.ID{c3: p3, p3: c1, c1: p1}
	pIn, pGate := make(chan struct{}, 1), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "g", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch {
				case msg == "hi":
					return "hi from " + id.Key(), nil
				case id != p1:
					return silo.Call[string](silo.AllowCallChainReentrancy(ctx), s, next[id], "go")
				}
				pIn <- struct{}{}
				<-pGate
				return "", callAtOnce(ctx, s, "hi", c1, c3)
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromP1 := askAsync(ctx, s, p1, "go")
	<-pIn
	fromC3 := askAsync(ctx, s, c3, "go")
	waitBacklog(t, s, 1) // c1's call waits behind p1's turn
	close(pGate)         // p1 calls c1 and c3: the cycles close
	err := <-fromP1
	require.ErrorIs(t, err, grain.ErrCallCycle)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, <-fromC3)
}

// fanningActivator's OnActivate calls every grain of to at once and waits
// for them all; its turns call the grain next, if set.
type fanningActivator struct {
	s    *silo.Silo
	to   []grain.ID
	next grain.ID
}

func (f *fanningActivator) Receive(ctx context.Context, _ *grain.Context, msg any) (any, error) {
	if msg == "hi" || f.next.IsZero() {
		return "hi", nil
	}
	return silo.Call[string](ctx, f.s, f.next, "hi")
}

func (f *fanningActivator) OnActivate(ctx context.Context, _ *grain.Context) error {
	return callAtOnce(ctx, f.s, "hi", f.to...)
}

// An OnActivate that fans out to two grains whose turns, on other chains,
// each call the activating grain.
func TestAFanOutFromOnActivateIntoGrainsThatCallItFailsFast(t *testing.T) {
	a, b, c := grain.NewID("act", "a"), grain.NewID("g", "b"), grain.NewID("g", "c")
	in, gate := make(chan struct{}, 2), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "act", func(grain.ID) *fanningActivator {
			return &fanningActivator{s: s, to: []grain.ID{b, c}}
		}))
		require.NoError(t, silo.Register(s, "g", callsBackKind(s, in, gate, a, "hi")))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromB, fromC := askAsync(ctx, s, b, "go"), askAsync(ctx, s, c, "go")
	<-in
	<-in
	fromA := askAsync(ctx, s, a, "go")
	waitBacklog(t, s, 2) // a's OnActivate's calls wait behind b's and c's turns
	close(gate)          // b and c call a, behind its activation
	var cycles int
	for _, err := range []error{<-fromB, <-fromC, <-fromA} {
		require.NotErrorIs(t, err, context.DeadlineExceeded)
		if errors.Is(err, grain.ErrCallCycle) {
			cycles++
		}
	}
	require.NotZero(t, cycles)
}

// Two tells' turns that call each other's grain, one of them fanning out.
func TestACycleOfTellsTurnsThatFanOutFailsFast(t *testing.T) {
	a, b, c := grain.NewID("g", "a"), grain.NewID("g", "b"), grain.NewID("g", "c")
	in, gate := make(chan struct{}, 2), make(chan struct{})
	results := make(chan error, 3)
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "g", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "hi", nil
				}
				in <- struct{}{}
				<-gate
				if id == b {
					_, err := silo.Call[string](ctx, s, a, "hi")
					results <- err
					return nil, nil
				}
				errs := make(chan error, 2)
				for _, to := range []grain.ID{b, c} {
					go func() { _, err := silo.Call[string](ctx, s, to, "hi"); errs <- err }()
				}
				results <- <-errs
				results <- <-errs
				return nil, nil
			}
		}))
	})
	require.NoError(t, s.Tell(ctxT(t), a, "go"))
	require.NoError(t, s.Tell(ctxT(t), b, "go"))
	<-in
	<-in
	close(gate)
	var cycles int
	for range 3 {
		err := <-results
		require.NotErrorIs(t, err, context.DeadlineExceeded)
		if errors.Is(err, grain.ErrCallCycle) {
			cycles++
		}
	}
	require.Equal(t, 1, cycles)
}

// A tangle: four grains whose turns each call every other one twice at
// once, and wait for all. The walk reaches each grain along many branches;
// it reads each once and settles what is free for all (walk.settle), where
// it took a step a route and gave up past maxCycle steps — every call
// waited for its deadline (found by the chaos program, four keys of one
// kind).
func TestATangleOfFanOutsFailsFast(t *testing.T) {
	ids := []grain.ID{grain.NewID("g", "0"), grain.NewID("g", "1"), grain.NewID("g", "2"), grain.NewID("g", "3")}
	in := make(chan struct{}, len(ids))
	gates := map[grain.ID]chan struct{}{}
	for _, id := range ids {
		gates[id] = make(chan struct{})
	}
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "g", func(self grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "hi", nil
				}
				in <- struct{}{}
				<-gates[self]
				var others []grain.ID
				for _, to := range ids {
					if to != self {
						others = append(others, to, to)
					}
				}
				return "", callAtOnce(ctx, s, "hi", others...)
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	var from []<-chan error
	for _, id := range ids {
		from = append(from, askAsync(ctx, s, id, "go"))
		<-in
	}
	for i, id := range ids[:len(ids)-1] {
		close(gates[id])
		waitBacklog(t, s, 6*(i+1)) // its calls wait behind the others' turns
	}
	close(gates[ids[len(ids)-1]]) // the last one's calls close cycles
	var cycles int
	for _, c := range from {
		err := <-c
		require.NotErrorIs(t, err, context.DeadlineExceeded)
		if errors.Is(err, grain.ErrCallCycle) {
			cycles++
		}
	}
	require.NotZero(t, cycles)
}

// A fan-out stuck once one of its calls is answered, on a cycle closed by
// an ask behind its caller: p's turn calls a; a's turn, running p's call,
// calls b and c at once; c's turn calls d, behind d's turn, which (another
// chain) calls p, behind p's. While b's call is out a may go on at its
// reply (no verdict); once b answers, a's turn is stuck. Its call left,
// to c, runs in c and waits behind nothing, and nothing waits behind a:
// the asks behind the grains on a's turn's call chain are walked too
// (partition.rewalkUp), and d's, behind p, closes the cycle. (Every call
// waited for its deadline: found by the chaos program.)
func TestAFanOutStuckOnACycleClosedBehindItsCallerFailsFast(t *testing.T) {
	p, a, b, c, d := grain.NewID("g", "p"), grain.NewID("g", "a"), grain.NewID("g", "b"), grain.NewID("g", "c"), grain.NewID("g", "d")
	bIn, dIn := make(chan struct{}, 1), make(chan struct{}, 1)
	bGate, dGate := make(chan struct{}), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "g", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch {
				case msg == "hi":
					return "hi", nil
				case id == p:
					return silo.Call[string](ctx, s, a, "go")
				case id == a:
					return "", callAtOnce(ctx, s, "go", b, c)
				case id == b:
					bIn <- struct{}{}
					<-bGate
					return "b", nil
				case id == c:
					return silo.Call[string](ctx, s, d, "hi") // behind d's turn
				}
				dIn <- struct{}{}
				<-dGate
				return silo.Call[string](ctx, s, p, "hi") // behind p's turn
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromD := askAsync(ctx, s, d, "go")
	<-dIn
	fromP := askAsync(ctx, s, p, "go")
	<-bIn
	waitBacklog(t, s, 1) // c's call waits behind d's turn
	close(dGate)
	waitBacklog(t, s, 2) // d's call waits behind p's turn: a may go on at b's reply
	close(bGate)         // b answers: a's turn is stuck
	requireCycle(t, <-fromD, d, p, a, c, d)
	require.NoError(t, <-fromP, "c's call to d answered once d's turn had ended")
}

// A reentrant grain's turn, running another grain's ask, closes the cycle:
// b's turn calls a, behind a's turn, which waits on r, reentrant, whose
// turn — running a's ask — calls b. r lets anything in, but the turn that
// calls b is answered only once b answers it. (The walk skipped a
// reentrant caller's asks, and every call waited for its deadline: found
// by the chaos program, plain and reentrant kinds, one call a turn.)
func TestACycleClosedByAReentrantGrainsTurnFailsFast(t *testing.T) {
	a, b, r := grain.NewID("hold", "a"), grain.NewID("hold", "b"), grain.NewID("re", "r")
	bIn, rIn := make(chan struct{}, 1), make(chan struct{}, 1)
	bGate, rGate := make(chan struct{}), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hold", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch {
				case msg == "hi":
					return "hi from " + id.Key(), nil
				case id == a:
					return silo.Call[string](ctx, s, r, "go")
				}
				bIn <- struct{}{}
				<-bGate
				return silo.Call[string](ctx, s, a, "hi") // behind a's turn
			}
		}))
		require.NoError(t, silo.Register(s, "re", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				rIn <- struct{}{}
				<-rGate
				return silo.Call[string](ctx, s, b, "hi") // behind b's turn
			}
		}, silo.WithReentrant()))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromB := askAsync(ctx, s, b, "go")
	<-bIn
	fromA := askAsync(ctx, s, a, "go")
	<-rIn
	close(bGate)
	waitBacklog(t, s, 1) // b's call waits behind a's turn
	close(rGate)         // r calls b: the cycle closes
	requireCycle(t, <-fromA, r, b, a, r)
	require.NoError(t, <-fromB, "b's call to a answered once a's turn had ended")
}

// A reentrant grain's turn, running another grain's ask, stuck once one
// of its fan-out's calls is answered: a's turn calls r, reentrant, whose
// turn calls b and c at once; c's turn (another chain) calls a, behind
// a's turn. While b's call is out r's turn may go on at its reply; once b
// answers, the walk is taken again from r's call left (Silo.endWait,
// which skipped reentrant grains: every call waited for its deadline,
// found by the chaos program).
func TestAReentrantTurnsFanOutStuckOnceACallIsAnsweredFailsFast(t *testing.T) {
	a, b, c, r := grain.NewID("hold", "a"), grain.NewID("hold", "b"), grain.NewID("hold", "c"), grain.NewID("re", "r")
	bIn, cIn := make(chan struct{}, 1), make(chan struct{}, 1)
	bGate, cGate := make(chan struct{}), make(chan struct{})
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hold", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch {
				case msg == "hi":
					return "hi from " + id.Key(), nil
				case id == a:
					return silo.Call[string](ctx, s, r, "go")
				case id == b:
					bIn <- struct{}{}
					<-bGate
					return "b", nil
				}
				cIn <- struct{}{}
				<-cGate
				return silo.Call[string](ctx, s, a, "hi") // behind a's turn
			}
		}))
		require.NoError(t, silo.Register(s, "re", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				errs := make(chan error, 2)
				go func() { _, err := silo.Call[string](ctx, s, b, "go"); errs <- err }()
				go func() { _, err := silo.Call[string](ctx, s, c, "hi"); errs <- err }()
				return "", errors.Join(<-errs, <-errs)
			}
		}, silo.WithReentrant()))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromC := askAsync(ctx, s, c, "go")
	<-cIn
	fromA := askAsync(ctx, s, a, "go")
	<-bIn
	waitBacklog(t, s, 1) // r's call to c waits behind c's turn
	close(cGate)
	waitBacklog(t, s, 2) // c's call waits behind a's turn: r may go on at b's reply
	close(bGate)         // b answers: r's turn is stuck
	err := <-fromA
	require.ErrorIs(t, err, grain.ErrCallCycle, "r's call to c failed")
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, <-fromC, "c's call to a answered once a's turn had ended")
}

// gateThenCall makes a kind whose turns answer "hi" at once; any other
// message tells in[key] the turn began, waits for gate[key], then calls
// next[id] with call[id] ("hi" if none), or answers "open" if id has no
// next.
func gateThenCall(s *silo.Silo, in, gate map[string]chan struct{}, next map[grain.ID]grain.ID, call map[grain.ID]string) func(grain.ID) grain.Func {
	return func(id grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			if msg == "hi" {
				return "hi", nil
			}
			in[id.Key()] <- struct{}{}
			<-gate[id.Key()]
			to, ok := next[id]
			if !ok {
				return "open", nil
			}
			m, ok := call[id]
			if !ok {
				m = "hi"
			}
			return silo.Call[string](ctx, s, to, m)
		}
	}
}

// callAtOnce calls every grain of ids with msg at once, each on a
// goroutine of its own with the turn's ctx, and waits for all: a fan-out.
func callAtOnce(ctx context.Context, s *silo.Silo, msg string, ids ...grain.ID) error {
	errs := make(chan error, len(ids))
	for _, id := range ids {
		go func() { _, err := silo.Call[string](ctx, s, id, msg); errs <- err }()
	}
	all := make([]error, len(ids))
	for i := range all {
		all[i] = <-errs
	}
	return errors.Join(all...)
}

// A fan-out stuck once one call is answered, on a cycle closed behind a
// stateless worker's activation on its turn's call chain: each of w's two
// activations calls a fan-out grain, a1 and a2, whose turns call b and c
// at once (b1 and c1, b2 and c2); each c calls d, behind d's turn, which
// (another chain) calls w — behind one of its activations, both busy.
// Once the bs answer, the as' turns are stuck; nothing waits behind
// them, and their calls left run in the cs: the asks behind the grains of
// their chains are walked again (partition.rewalkUp) — behind each of w's
// activations, which one a chain's turn runs in being unknown — and d's
// fails. (A stateless identity on the chain was passed over, and every
// call waited for its deadline: found by the chaos program, -kinds
// plain,sw.)
func TestAFanOutStuckOnACycleClosedBehindAStatelessCallerFailsFast(t *testing.T) {
	in, gate := map[string]chan struct{}{}, map[string]chan struct{}{}
	for _, k := range []string{"b1", "b2", "c1", "c2", "d"} {
		in[k], gate[k] = make(chan struct{}, 1), make(chan struct{})
	}
	w, d := grain.NewID("sw", "w"), grain.NewID("hold", "d")
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "sw", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "w-ok", nil
				}
				return silo.Call[string](ctx, s, grain.NewID("fan", msg.(string)), "go")
			}
		}, silo.WithStatelessWorker(2)))
		require.NoError(t, silo.Register(s, "fan", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				n := id.Key()[1:]
				return "a-ok", callAtOnce(ctx, s, "ping", grain.NewID("gate", "b"+n), grain.NewID("relay", "c"+n))
			}
		}))
		require.NoError(t, silo.Register(s, "gate", func(id grain.ID) grain.Func {
			return func(context.Context, *grain.Context, any) (any, error) {
				in[id.Key()] <- struct{}{}
				<-gate[id.Key()]
				return "open", nil
			}
		}))
		require.NoError(t, silo.Register(s, "relay", func(id grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				in[id.Key()] <- struct{}{}
				return silo.Call[string](ctx, s, d, "hi")
			}
		}))
		require.NoError(t, silo.Register(s, "hold", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "d-ok", nil
				}
				in["d"] <- struct{}{}
				<-gate["d"]
				return silo.Call[string](ctx, s, w, "hi")
			}
		}))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromD := askAsync(ctx, s, d, "go")
	<-in["d"]
	var fromW []<-chan error
	for n := range 2 {
		k := strconv.Itoa(n + 1)
		fromW = append(fromW, askAsync(ctx, s, w, "a"+k)) // the second goes to w's other activation, the first busy
		<-in["b"+k]
		<-in["c"+k]
		waitBacklog(t, s, n+1) // c's call waits behind d's turn
	}
	close(gate["d"])
	waitBacklog(t, s, 3) // d's call waits behind an activation of w: the as may go on at the bs' replies
	close(gate["b1"])
	close(gate["b2"]) // the as' turns are stuck
	err := <-fromD
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	var cyc *grain.CallCycleError
	require.ErrorAs(t, err, &cyc)
	assert.Contains(t, [][]grain.ID{
		{d, w, grain.NewID("fan", "a1"), grain.NewID("relay", "c1"), d},
		{d, w, grain.NewID("fan", "a2"), grain.NewID("relay", "c2"), d},
	}, cyc.Chain)
	for _, c := range fromW {
		require.NoError(t, <-c, "a's turn ends once c's call to d is answered")
	}
}

// A cycle through one stuck fan-out, through the turn that holds an
// interleaving grain: p calls a; a's turn calls b and c at once; c's turn
// calls m, behind m's first turn, which holds m (holding.go), while
// WithMayInterleave let a second in beside it: the first calls y1, whose
// turn calls a, behind a's; the second calls y2, whose turn calls p,
// behind p's. Once b answers, a's turn is stuck: the ask behind a, y1's,
// fails. m's first turn ends, and c's call goes in beside the second —
// which holds nothing — so a's turn goes on, p's ends, and y2's ask is
// answered. (Before one turn held a WithMayInterleave grain, c's call
// waited for m's second turn too, which waited on p: a second cycle, which
// the walk found behind the grains of a's chain, partition.rewalkUp. The
// walk had stopped at the first ask it failed, and y2's waited for its
// deadline: found by the chaos program, -kinds plain,reent,mayin,chain.)
func TestACycleThroughAStuckFanOutFailsFastAndTheHoldersEndLetsTheRestGo(t *testing.T) {
	in, gate := map[string]chan struct{}{}, map[string]chan struct{}{}
	for _, k := range []string{"p", "b", "y1", "y2"} {
		in[k], gate[k] = make(chan struct{}, 1), make(chan struct{})
	}
	p, a, b, c, m := grain.NewID("hold", "p"), grain.NewID("fan", "a"), grain.NewID("hold", "b"), grain.NewID("relay", "c"), grain.NewID("mi", "m")
	y1, y2 := grain.NewID("hold", "y1"), grain.NewID("hold", "y2")
	next := map[grain.ID]grain.ID{p: a, y1: a, y2: p}
	call := map[grain.ID]string{p: "go", y1: "hi", y2: "hi"} // p's call makes a's turn fan out
	s := newSilo(t, silo.Config{}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hold", gateThenCall(s, in, gate, next, call)))
		require.NoError(t, silo.Register(s, "fan", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg == "hi" {
					return "hi", nil
				}
				return "a-ok", callAtOnce(ctx, s, "go", b, c)
			}
		}))
		require.NoError(t, silo.Register(s, "relay", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, _ any) (any, error) {
				return silo.Call[string](ctx, s, m, "other")
			}
		}))
		require.NoError(t, silo.Register(s, "mi", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				switch msg {
				case "go1":
					return silo.Call[string](ctx, s, y1, "go")
				case "in":
					return silo.Call[string](ctx, s, y2, "go")
				}
				return "m-ok", nil
			}
		}, silo.WithMayInterleave(func(msg any) bool { return msg == "in" })))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromP := askAsync(ctx, s, p, "go")
	<-in["p"]
	fromGo1 := askAsync(ctx, s, m, "go1")
	<-in["y1"] // m's first turn waits on y1
	fromIn := askAsync(ctx, s, m, "in")
	<-in["y2"] // let in beside it, m's second turn waits on y2
	close(gate["p"])
	<-in["b"]            // a's turn calls b and c; b holds
	waitBacklog(t, s, 1) // c's call waits behind m's turns
	close(gate["y1"])
	waitBacklog(t, s, 2) // y1's call waits behind a's turn: a may go on at b's reply
	close(gate["y2"])
	waitBacklog(t, s, 3) // y2's call waits behind p's turn
	close(gate["b"])     // b answers: a's turn is stuck
	err := <-fromGo1
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, grain.ErrCallCycle)
	require.NoError(t, <-fromP, "a's turn ends once m's holder has, and c's call is answered")
	require.NoError(t, <-fromIn, "y2's call is answered once p's turn has ended")
	assert.Equal(t, uint64(1), s.Stats().DeadLetters[grain.ReasonDeadlock])
}

// A cycle through a call back on a chain let in by a stateless
// activation: w's first activation waits on g; c's turn calls w (its
// second activation), whose turn calls w again, back on its own chain —
// let in beside that turn, on its activation — and that turn calls x,
// whose turn (another chain) calls c. The walk from x's call finds the
// let-in turn among its activation's and fails x's call at once. (It
// passes on the build before partition.interleave recorded where a
// stateless activation runs an ask it lets in, takenAt, as well: the call
// back runs on the activation whose turn waits, which the walk reads
// whole. The next test reaches a let-in call by its caller's wait instead,
// and fails on that build.)
func TestACycleThroughACallLetInByAStatelessActivationFailsFast(t *testing.T) {
	in, gate := map[string]chan struct{}{}, map[string]chan struct{}{}
	for _, k := range []string{"x", "g"} {
		in[k], gate[k] = make(chan struct{}, 1), make(chan struct{})
	}
	c, w, x, g := grain.NewID("fan", "c"), grain.NewID("sw", "w"), grain.NewID("hold", "x"), grain.NewID("hold", "g")
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		registerLetInChain(t, s, w, x, "hold", g)
		require.NoError(t, silo.Register(s, "hold", gateThenCall(s, in, gate, map[grain.ID]grain.ID{x: c}, nil)))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromX := askAsync(ctx, s, x, "go")
	<-in["x"]
	fromHold := askAsync(ctx, s, w, "hold") // w's first activation waits on g
	<-in["g"]
	fromC := askAsync(ctx, s, c, "go") // w's second activation calls w back; let in, it calls x
	waitBacklog(t, s, 1)               // the let-in turn's call waits behind x's turn
	close(gate["x"])                   // x calls c: the cycle closes
	err := <-fromX
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	requireCycle(t, err, x, c, w, x)
	require.NoError(t, <-fromC, "w's turns end once x's has")
	close(gate["g"])
	require.NoError(t, <-fromHold)
}

// registerLetInChain registers the kinds of the two tests above: "fan",
// whose turns call w "outer" on their chain; and "sw", w's, a stateless
// worker of two activations whose turn for start calls next "go" on its
// chain, whose "outer" calls w back ("inner", on its own chain: let in),
// and whose "inner" calls x.
func registerLetInChain(t *testing.T, s *silo.Silo, w, x grain.ID, start string, next grain.ID) {
	require.NoError(t, silo.Register(s, "fan", func(grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			if msg == "hi" {
				return "c-ok", nil
			}
			return silo.Call[string](silo.AllowCallChainReentrancy(ctx), s, w, "outer")
		}
	}))
	require.NoError(t, silo.Register(s, "sw", func(grain.ID) grain.Func {
		return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
			switch msg {
			case start:
				return silo.Call[string](silo.AllowCallChainReentrancy(ctx), s, next, "go")
			case "outer": // a call back on its own chain
				return silo.Call[string](silo.AllowCallChainReentrancy(ctx), s, w, "inner")
			}
			return silo.Call[string](ctx, s, x, "hi") // inner, let in
		}
	}, silo.WithStatelessWorker(2)))
}

// The same through two calls let in, one after the other, by a stateless
// activation: w's turn (root) calls c, whose turn calls w back (outer,
// let in beside root), whose turn calls w back again (inner, let in too),
// which calls x; x's turn (another chain) calls c. The walk from x's call
// reaches outer not through w's activation, read whole, but as the call
// c's turn waits on: it finds outer's turn, and inner's after it, only by
// where the activation records running them (partition.interleave,
// takenAt). Unrecorded, outer was taken for a call that would be
// answered, and x's call waited for its deadline.
func TestACycleThroughCallsLetInByAStatelessActivationFailsFast(t *testing.T) {
	in, gate := map[string]chan struct{}{"x": make(chan struct{}, 1)}, map[string]chan struct{}{"x": make(chan struct{})}
	c, w, x := grain.NewID("fan", "c"), grain.NewID("sw", "w"), grain.NewID("hold", "x")
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		registerLetInChain(t, s, w, x, "root", c)
		require.NoError(t, silo.Register(s, "hold", gateThenCall(s, in, gate, map[grain.ID]grain.ID{x: c}, nil)))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromX := askAsync(ctx, s, x, "go")
	<-in["x"]
	fromW := askAsync(ctx, s, w, "root")
	waitBacklog(t, s, 1) // inner's call waits behind x's turn
	close(gate["x"])     // x calls c: the cycle closes
	err := <-fromX
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	requireCycle(t, err, x, c, w, w, x)
	require.NoError(t, <-fromW, "w's turns end once x's has")
}

// A cycle left to be found behind a grain with a long backlog: m's turn
// calls g and y at once, and y's turn calls z, behind z's turn (another
// chain), which — once a hundred asks from outside wait behind m — calls
// m, while g's turn may still answer: no cycle yet. Once g answers, m's
// turn is stuck on y, whose call runs in y: the asks behind m are walked
// again. Walked one at a time, up to maxCycle of them, the hundred from
// outside came first and z's never was: every call waited for its
// deadline. One walk from m finds the turns stuck on it, z's among them,
// and fails z's call at once.
func TestACycleBehindALongBacklogFailsFast(t *testing.T) {
	in, gate := map[string]chan struct{}{}, map[string]chan struct{}{}
	for _, k := range []string{"g", "y", "z"} {
		in[k], gate[k] = make(chan struct{}, 1), make(chan struct{})
	}
	close(gate["y"])
	m, g, y, z := grain.NewID("hub", "m"), grain.NewID("hold", "g"), grain.NewID("hold", "y"), grain.NewID("hold", "z")
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "hub", func(grain.ID) grain.Func {
			return func(ctx context.Context, _ *grain.Context, msg any) (any, error) {
				if msg != "fan" {
					return "ok", nil
				}
				return "fanned", callAtOnce(ctx, s, "go", g, y)
			}
		}))
		require.NoError(t, silo.Register(s, "hold", gateThenCall(s, in, gate, map[grain.ID]grain.ID{y: z, z: m}, map[grain.ID]string{y: "go"})))
	})
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	fromZ := askAsync(ctx, s, z, "go")
	<-in["z"]
	fromM := askAsync(ctx, s, m, "fan")
	<-in["g"]
	<-in["y"]
	waitBacklog(t, s, 1) // y's call waits behind z's turn
	const behind = 100
	waiting := make([]<-chan error, behind)
	for i := range waiting {
		waiting[i] = askAsync(ctx, s, m, "q")
	}
	waitBacklog(t, s, 1+behind)
	close(gate["z"]) // z calls m, behind the hundred
	waitBacklog(t, s, 2+behind)
	close(gate["g"]) // g answers: m's turn waits on y alone
	err := <-fromZ
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	requireCycle(t, err, z, m, y, z)
	require.ErrorIs(t, <-fromM, grain.ErrCallCycle, "z's failure passed on through y")
	for _, w := range waiting {
		require.NoError(t, <-w)
	}
}
