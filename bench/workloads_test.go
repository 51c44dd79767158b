package main

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// small shrinks a workload's quick size further, so every implementation
// runs every workload in a test.
func small(name string) params {
	p := sizes[name][1]
	p.grains = min(p.grains, 200)
	p.callers = min(p.callers, 20)
	p.msgs = min(p.msgs, 4000)
	if p.block > 0 {
		p.block = 20 * time.Millisecond
	}
	return p
}

func TestEveryImplementationRunsEveryWorkload(t *testing.T) {
	for _, name := range workloadNames() {
		for _, impl := range impls {
			f := workloads[name][impl]
			if f == nil {
				continue
			}
			t.Run(name+"/"+impl, func(t *testing.T) {
				r, err := f(impl, small(name))
				if err != nil {
					t.Fatal(err)
				}
				if r.OpsPerSec <= 0 {
					t.Errorf("ops/s = %v", r.OpsPerSec)
				}
			})
		}
	}
}

// counter is a target that counts in place, on the caller's goroutine;
// lossy drops the count of the message it is told to, as a runtime that
// lost it would.
type counter struct {
	mu     sync.Mutex
	n      map[int64]int
	sig    atomic.Int64
	sent   atomic.Int64
	dropAt int64 // the 1-based message to drop; 0 drops none
}

func (c *counter) handle(key int64, m *bmsg) int {
	if c.sent.Add(1) == c.dropAt {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[int64]int{}
	}
	if m.to > 0 { // the relay: the inner call, made in place
		c.n[m.to-1]++
		return c.n[m.to-1]
	}
	if m.count {
		c.n[key]++
	}
	if m.signal {
		c.sig.Add(1)
	}
	return c.n[key]
}

func (c *counter) Tell(key int64, m *bmsg) error { c.handle(key, m); return nil }
func (c *counter) Ask(key int64, m *bmsg) (int, error) {
	return c.handle(key, m), nil
}
func (c *counter) Caller() func(int64, *bmsg) (int, error) { return c.Ask }
func (c *counter) Signals() int64                          { return c.sig.Load() }
func (c *counter) StateSize() uintptr                      { return unsafe.Sizeof(0) }
func (c *counter) Close()                                  {}

// A run that loses a message fails, and says so: in the check of its
// totals, or — where it waits for its messages to be handled — once its
// count stops moving. It never hangs.
func TestALostMessageFailsTheRun(t *testing.T) {
	runs := map[string]func(target, params) (Result, error){
		"tell": runTell, "zipf": runZipf, "ask": runAsk, "activate": runActivate, "flood": runFlood,
		"steady": runSteady, "relay": runRelay,
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			p := small(name)
			if _, err := run(&counter{}, p); err != nil {
				t.Fatalf("nothing lost: %v", err)
			}
			synctest.Test(t, func(t *testing.T) {
				// Past the activations that tell and ask begin with.
				c := &counter{dropAt: int64(p.grains) + 7}
				_, err := run(c, p)
				if err == nil || !strings.Contains(err.Error(), "lost messages") {
					t.Fatalf("one message lost: err = %v", err)
				}
				t.Log(err)
			})
		})
	}
}

// timed is a counter whose tells and asks take time: time.Sleep in a
// synctest bubble, so the test's clock moves by exactly that.
type timed struct {
	counter
	tell, ask time.Duration
}

func (c *timed) Tell(key int64, m *bmsg) error {
	time.Sleep(c.tell)
	return c.counter.Tell(key, m)
}

func (c *timed) Ask(key int64, m *bmsg) (int, error) {
	time.Sleep(c.ask)
	return c.counter.Ask(key, m)
}

// tell and zipf time their tells until the check's read has seen every
// one, less that read's own cost (the same read again, all idle), which
// they report: the tells' 1 s here, not the 1.5 s with the 0.5 s read.
func TestTellAndZipfTakeTheChecksReadOffTheirTime(t *testing.T) {
	for name, run := range map[string]func(target, params) (Result, error){"tell": runTell, "zipf": runZipf} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := params{grains: 100, producers: 2, msgs: 2000}
				// activateAll's tells (one a grain, from one goroutine)
				// cost 100 ms before the clock starts; the producers' 1000
				// each cost 1 s, side by side; a read, 100 asks, 0.5 s.
				c := &timed{tell: time.Millisecond, ask: 5 * time.Millisecond}
				r, err := run(c, p)
				if err != nil {
					t.Fatal(err)
				}
				if r.OpsPerSec != 2000 || r.CheckReadMs != 500 {
					t.Fatalf("%v ops/s, the read %v ms: want 2000 (the tells' 1 s) and 500", r.OpsPerSec, r.CheckReadMs)
				}
			})
		})
	}
}

// The ping-pong workloads wait for their last message on a channel; a
// count that stops moving ends the wait with an error.
func TestAStalledRunFailsAtTheStallLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := params{msgs: 10, stall: time.Minute}
		done := make(chan struct{})
		start := time.Now()
		// Three messages handled in the first three seconds (of the
		// bubble's clock, which waitDone's timer moves), then none.
		count := func() int64 { return min(3, int64(time.Since(start)/time.Second)) }
		err := waitDone(p, done, int64(p.msgs), count)
		if err == nil || !strings.Contains(err.Error(), "3 of 10 handled") {
			t.Fatalf("err = %v", err)
		}
		// The first look, a minute in, saw progress; the second, a minute
		// of none later, gives up.
		if waited := time.Since(start); waited != 2*time.Minute {
			t.Errorf("gave up after %v, want 2m: the limit counts from the last progress", waited)
		}

		close(done)
		if err := waitDone(p, done, int64(p.msgs), count); err != nil {
			t.Errorf("done: %v", err)
		}
	})
}

// The table's ratio columns are medians of ratios measured in the same run,
// not ratios of medians: here granary's median ops/s over protoactor's is
// 1.0x, while run by run granary did 2, 1.5 and 0.5 times protoactor.
func TestTheTableComparesRunsSideBySide(t *testing.T) {
	var rs []Result
	add := func(impl string, ops ...float64) {
		for i, v := range ops {
			rs = append(rs, Result{Workload: "tell", Impl: impl, Run: i + 1, OpsPerSec: v})
		}
	}
	add("granary", 10, 30, 20)
	add("protoactor", 5, 20, 40)
	add("raw", 20, 30, 40)
	got := table(rs)
	for _, want := range []string{
		"| tell | granary | 20 | 1.50x | 0.50x | – | – | – |",    // per run: 2, 1.5, 0.5 and 0.5, 1, 0.5
		"| tell | protoactor | 20 | 1.00x | 0.67x | – | – | – |", // per run: 0.25, 0.67, 1
		"| tell | raw | 30 | 1.50x | 1.00x | – | – | – |",        // per run: 4, 1.5, 1
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// The table's medians are true medians for any number of runs (-runs).
func TestMedianOfAnEvenNumberOfRunsIsTheMeanOfTheMiddleTwo(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{4, 1}, 2.5},
		{[]float64{5, 1, 3}, 3},
		{[]float64{8, 1, 2, 4}, 3},
	} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// Over as many runs as there are implementations, each runs once in each
// place of a run's order: none always first, none always after another.
func TestTheOrderRotatesFromRunToRun(t *testing.T) {
	place := map[string]map[int]bool{}
	follows := map[[2]string]int{}
	for r := range len(impls) {
		order := rotated(impls, r)
		if len(order) != len(impls) {
			t.Fatalf("run %d: order %v", r+1, order)
		}
		for i, im := range order {
			if place[im] == nil {
				place[im] = map[int]bool{}
			}
			place[im][i] = true
			if i > 0 {
				follows[[2]string{order[i-1], im}]++
			}
		}
	}
	for _, im := range impls {
		if len(place[im]) != len(impls) {
			t.Errorf("%s runs in places %v, not in each once", im, place[im])
		}
	}
	for pair, n := range follows {
		if n == len(impls) {
			t.Errorf("%s always runs right after %s", pair[1], pair[0])
		}
	}
	if got := rotated(impls, len(impls)+1); !slices.Equal(got, rotated(impls, 1)) {
		t.Errorf("rotated by %d: %v", len(impls)+1, got)
	}
	if !slices.Equal(impls, []string{"granary", "protoactor", "raw"}) {
		t.Errorf("rotated changed impls: %v", impls)
	}
}
