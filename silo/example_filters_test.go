package silo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// A purse grain, behind two filters: every kind's turns are logged (a
// filter in Config), and a purse refuses a payment out that is not
// signed (a filter of the kind).
type purse struct{ balance int }

type (
	payIn  struct{ n int }
	payOut struct {
		n      int
		signed bool
	}
)

func (a *purse) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case payIn:
		a.balance += m.n
	case payOut:
		a.balance -= m.n
	}
	return a.balance, nil
}

var errUnsigned = errors.New("unsigned payment")

func ExampleWithFilters() {
	var mu sync.Mutex // a filter runs on many partitions at once
	var log []string
	logging := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		reply, err := next.Receive(ctx, c, msg)
		mu.Lock()
		log = append(log, fmt.Sprintf("%v %T -> %v, %v", c.ID(), msg, reply, err))
		mu.Unlock()
		return reply, err
	})
	signed := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		if w, ok := msg.(payOut); ok && !w.signed {
			return nil, errUnsigned // the grain never sees it
		}
		return next.Receive(ctx, c, msg)
	})

	s, _ := silo.New(silo.Config{Filters: []grain.Filter{logging}})
	_ = silo.Register(s, "purse", func(grain.ID) *purse { return &purse{} }, silo.WithFilters(signed))
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()
	acct := grain.NewID("purse", "alice")

	_, _ = s.Ask(ctx, acct, payIn{100})
	_, err := s.Ask(ctx, acct, payOut{n: 70})
	fmt.Println(errors.Is(err, errUnsigned))
	balance, _ := silo.Call[int](ctx, s, acct, payOut{n: 70, signed: true})
	fmt.Println(balance)

	_ = s.Shutdown(ctx)
	mu.Lock()
	fmt.Println(strings.Join(log, "\n"))
	mu.Unlock()
	// Output:
	// true
	// 30
	// purse/alice silo_test.payIn -> 100, <nil>
	// purse/alice silo_test.payOut -> <nil>, unsigned payment
	// purse/alice silo_test.payOut -> 30, <nil>
}

// Config.SendFilters run on the sender's side, around every message a
// grain sends through its Context's Silo() and every one sent through
// Silo.Runtime(): here one counts calls by the kind they went to — what a
// Filter around the turn, on the callee's side, cannot see of who called —
// and one refuses sends to a kind the sender may not reach.
func ExampleConfig_sendFilters() {
	var mu sync.Mutex // a filter runs on many goroutines at once
	calls := map[string]int{}
	counting := grain.SendFilterFunc(func(ctx context.Context, m grain.Send, next grain.SendNext) (any, error) {
		if m.Ask {
			mu.Lock()
			calls[m.From.Kind()+" -> "+m.To.Kind()]++
			mu.Unlock()
		}
		return next(ctx, m) // the filters after this one, then the send
	})
	errForbidden := errors.New("checkout may not reach the ledger")
	guard := grain.SendFilterFunc(func(ctx context.Context, m grain.Send, next grain.SendNext) (any, error) {
		if m.From.Kind() == "checkout" && m.To.Kind() == "ledger" {
			return nil, errForbidden // nothing is sent
		}
		return next(ctx, m)
	})

	s, _ := silo.New(silo.Config{SendFilters: []grain.SendFilter{counting, guard}})
	_ = silo.Register(s, "pricer", func(grain.ID) grain.Func {
		return func(_ context.Context, _ *grain.Context, msg any) (any, error) { return 250 * msg.(int), nil }
	})
	_ = silo.Register(s, "ledger", func(grain.ID) grain.Func {
		return func(context.Context, *grain.Context, any) (any, error) { return "booked", nil }
	})
	_ = silo.Register(s, "checkout", func(grain.ID) grain.Func {
		return func(ctx context.Context, c *grain.Context, msg any) (any, error) {
			cents, err := silo.Call[int](ctx, c.Silo(), grain.NewID("pricer", "eu"), msg)
			if err != nil {
				return nil, err
			}
			_, err = c.Silo().Ask(ctx, grain.NewID("ledger", "main"), cents)
			return cents, err
		}
	})
	_ = s.Start()
	defer s.Close()
	ctx := context.Background()

	_, err := s.Ask(ctx, grain.NewID("checkout", "c1"), 3)
	fmt.Println(err)
	v, _ := s.Runtime().Ask(ctx, grain.NewID("ledger", "main"), 750) // from outside: no grain sends it
	fmt.Println(v)
	mu.Lock()
	fmt.Println(calls["checkout -> pricer"], calls["checkout -> ledger"], calls[" -> ledger"])
	mu.Unlock()
	// Output:
	// checkout may not reach the ledger
	// booked
	// 1 1 1
}
