package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"
)

// bmsg is the message of the counting grain, shared by every implementation.
// Messages are pointers to a few shared values, so sending allocates nothing.
type bmsg struct {
	reply  bool // reply with the count
	count  bool // increment
	signal bool // also count in the runtime's handled-signal counter
	work   bool // spend floodWork of CPU first (the flood workload)
	// to, if not 0: ask grain to-1 for its count (which counts it) from
	// inside the turn, and answer with that (the relay workload)
	to int64
}

var (
	incrMsg   = &bmsg{count: true}
	askMsg    = &bmsg{count: true, reply: true}
	peekMsg   = &bmsg{reply: true}
	signalMsg = &bmsg{count: true, signal: true}
	floodMsg  = &bmsg{count: true, signal: true, work: true}
)

// target is what the generic workloads need of an implementation: a counting
// grain per key.
type target interface {
	Tell(key int64, m *bmsg) error
	Ask(key int64, m *bmsg) (int, error)
	// Caller returns the Ask of one caller: a client with its own request
	// context, as each client of a service has.
	Caller() func(key int64, m *bmsg) (int, error)
	Signals() int64 // how many signal messages were handled
	StateSize() uintptr
	Close()
}

type params struct {
	grains, producers, callers, msgs int
	rate                             int // steady: asks a second, from all callers
	block                            time.Duration
	// stall: how long a run waits with no message handled before it fails
	// as having lost one (defaultStall if zero). A lost message must fail
	// the run, never hang it.
	stall time.Duration
}

const defaultStall = 30 * time.Second

func (p params) stallLimit() time.Duration {
	if p.stall > 0 {
		return p.stall
	}
	return defaultStall
}

func (p params) asMap() map[string]any {
	m := map[string]any{}
	if p.grains > 0 {
		m["grains"] = p.grains
	}
	if p.producers > 0 {
		m["producers"] = p.producers
	}
	if p.callers > 0 {
		m["callers"] = p.callers
	}
	if p.msgs > 0 {
		m["messages"] = p.msgs
	}
	if p.rate > 0 {
		m["rate"] = p.rate
	}
	if p.block > 0 {
		m["block"] = p.block.String()
	}
	m["gomaxprocs"] = runtime.GOMAXPROCS(0)
	return m
}

type workloadFunc func(impl string, p params) (Result, error)

var constructors = map[string]func() target{
	"granary":    newGranaryTarget,
	"protoactor": newProtoTarget,
	"raw":        newRawTarget,
}

// workloads[name][impl]; sizes[name] gives full and quick parameters.
var workloads = map[string]map[string]workloadFunc{
	"tell":     generic(runTell),
	"ask":      generic(runAsk),
	"zipf":     generic(runZipf),
	"activate": generic(runActivate),
	"pingpong": {"granary": pingGranary, "protoactor": pingProto, "raw": pingRaw},
	"blocked":  {"granary": blockedGranary, "raw": blockedRaw},
	"flood":    generic(runFlood),
	"steady":   generic(runSteady),
	"relay":    only(generic(runRelay), "granary", "protoactor"),
}

var sizes = map[string][2]params{
	"tell":     {{grains: 10_000, producers: 2, msgs: 10_000_000}, {grains: 10_000, producers: 2, msgs: 400_000}},
	"ask":      {{grains: 10_000, callers: 1000, msgs: 2_000_000}, {grains: 10_000, callers: 1000, msgs: 100_000}},
	"pingpong": {{msgs: 2_000_000}, {msgs: 100_000}},
	"activate": {{msgs: 1_000_000}, {msgs: 100_000}},
	"zipf":     {{grains: 100_000, producers: 2, msgs: 10_000_000}, {grains: 100_000, producers: 2, msgs: 400_000}},
	"blocked":  {{grains: 1000, msgs: 20_000, block: 2 * time.Second}, {grains: 1000, msgs: 2_000, block: 200 * time.Millisecond}},
	"flood":    {{grains: 100, msgs: 10_000}, {grains: 100, msgs: 1_000}},
	"steady":   {{grains: 10_000, callers: 1000, msgs: 250_000, rate: 50_000}, {grains: 10_000, callers: 1000, msgs: 10_000, rate: 50_000}},
	"relay":    {{grains: 20_000, callers: 1000, msgs: 100_000, rate: 20_000}, {grains: 20_000, callers: 1000, msgs: 4_000, rate: 20_000}},
}

func workloadNames() []string {
	return []string{"tell", "ask", "pingpong", "activate", "zipf", "blocked", "flood", "steady", "relay"}
}

func runChild(workload, impl string, quick bool, rate int) Result {
	res := Result{Workload: workload, Impl: impl}
	f := workloads[workload][impl]
	if f == nil {
		res.Error = fmt.Sprintf("no %s implementation of %s", impl, workload)
		return res
	}
	p := sized(workload, quick, rate)
	res.Params = p.asMap()
	r, err := f(impl, p)
	r.Workload, r.Impl, r.Params = workload, impl, res.Params
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// sized returns a workload's parameters: its quick or full size, and for
// a paced workload (steady, relay) the rate, if one is given (> 0), with
// as many calls as keep its run as long as at its own rate — and one a
// caller at least.
func sized(workload string, quick bool, rate int) params {
	p := sizes[workload][0]
	if quick {
		p = sizes[workload][1]
	}
	if rate > 0 && p.rate > 0 {
		p.msgs = max(p.callers, int(int64(p.msgs)*int64(rate)/int64(p.rate)))
		p.rate = rate
	}
	return p
}

// takesRate reports whether a workload paces its calls (takes -rate).
func takesRate(workload string) bool {
	return sizes[workload][0].rate > 0
}

// only keeps the implementations named of m.
func only(m map[string]workloadFunc, names ...string) map[string]workloadFunc {
	for name := range m {
		if !slices.Contains(names, name) {
			delete(m, name)
		}
	}
	return m
}

func generic(f func(t target, p params) (Result, error)) map[string]workloadFunc {
	m := map[string]workloadFunc{}
	for name, mk := range constructors {
		m[name] = func(_ string, p params) (Result, error) {
			t := mk()
			defer t.Close()
			return f(t, p)
		}
	}
	return m
}

// activateAll sends one ask to each grain, so the timed part measures
// messaging to active grains.
func activateAll(t target, grains int) error {
	for k := range grains {
		if _, err := t.Ask(int64(k), askMsg); err != nil {
			return err
		}
	}
	return nil
}

// total asks every grain for its count: the check that no message was lost,
// and the flush that ends the timed part.
func total(t target, grains int) (int, error) {
	sum := 0
	for k := range grains {
		n, err := t.Ask(int64(k), peekMsg)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

func tellAll(t target, producers, msgs int, key func(producer, i int) int64) error {
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for i := range msgs / producers {
				if err := t.Tell(key(p, i), incrMsg); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitHandled waits, polling every poll, until handled() reaches want. A
// run whose count stops moving for the stall limit fails with the count it
// reached.
func waitHandled(p params, want int64, handled func() int64, poll time.Duration) error {
	last, since := handled(), time.Now()
	for n := last; n < want; n = handled() {
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= p.stallLimit() {
			return fmt.Errorf("lost messages: %d of %d handled, none more in %v", n, want, p.stallLimit())
		}
		time.Sleep(poll)
	}
	return nil
}

// waitDone waits until done is closed, which a run's last message does; a
// run whose count stops moving for the stall limit fails with the count it
// reached. Nothing polls while the count moves: the ping-pong workloads
// measure latency.
func waitDone(p params, done <-chan struct{}, want int64, count func() int64) error {
	t := time.NewTimer(p.stallLimit())
	defer t.Stop()
	last := count()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
		}
		n := count()
		if n == last {
			return fmt.Errorf("lost messages: %d of %d handled, none more in %v", n, want, p.stallLimit())
		}
		last = n
		t.Reset(p.stallLimit())
	}
}

func check(got, want int) error {
	if got != want {
		return fmt.Errorf("lost messages: counted %d, want %d", got, want)
	}
	return nil
}

func runTell(t target, p params) (Result, error) {
	if err := activateAll(t, p.grains); err != nil {
		return Result{}, err
	}
	per := p.msgs / p.producers
	r, sum, err := timedTells(t, p, func(prod, i int) int64 { return int64((prod*per + i) % p.grains) })
	if err != nil {
		return Result{}, err
	}
	return r, check(sum, p.grains+per*p.producers)
}

// timedTells sends p.msgs tells from p.producers goroutines, key choosing
// each one's grain, and times them until every one is handled; it gives
// the sum of the grains' counts. The check's read of every count (total),
// one ask a grain, waits behind each grain's tells, so it ends the clock —
// but its own cost, the same read again once all is idle, is taken off:
// 100,000 asks one after another from one goroutine are not what tell and
// zipf measure, and they cost the implementations unevenly (about 1.3 µs
// an ask for Granary's, 0.5 for raw's and 6 for protoactor's: on zipf's
// 100,000 grains, 130, 50 and 640 ms — a tenth of Granary's run, a
// fourteenth of raw's). Until the two-hundred-and-fifth full run the read
// was timed (docs/performance-log.md). The clock never stops before the
// producers have sent their last.
func timedTells(t target, p params, key func(producer, i int) int64) (Result, int, error) {
	start := time.Now()
	if err := tellAll(t, p.producers, p.msgs, key); err != nil {
		return Result{}, 0, err
	}
	sent := time.Since(start)
	sum, err := total(t, p.grains)
	el := time.Since(start)
	if err != nil {
		return Result{}, 0, err
	}
	r0 := time.Now()
	again, err := total(t, p.grains)
	read := time.Since(r0)
	if err != nil {
		return Result{}, 0, err
	}
	if again != sum {
		return Result{}, 0, fmt.Errorf("lost messages: the counts summed %d, then %d with nothing sent", sum, again)
	}
	el = max(el-read, sent)
	return Result{OpsPerSec: float64(p.msgs) / el.Seconds(), CheckReadMs: float64(read.Microseconds()) / 1000}, sum, nil
}

func runZipf(t target, p params) (Result, error) {
	if err := activateAll(t, p.grains); err != nil {
		return Result{}, err
	}
	// Keys are drawn before the clock starts, so the generator is not measured.
	keys := make([][]int64, p.producers)
	for prod := range keys {
		z := rand.NewZipf(rand.New(rand.NewPCG(uint64(prod), 11)), 1.1, 1, uint64(p.grains-1))
		keys[prod] = make([]int64, p.msgs/p.producers)
		for i := range keys[prod] {
			keys[prod][i] = int64(z.Uint64())
		}
	}
	r, sum, err := timedTells(t, p, func(prod, i int) int64 { return keys[prod][i] })
	if err != nil {
		return Result{}, err
	}
	return r, check(sum, p.grains+p.msgs/p.producers*p.producers)
}

func runAsk(t target, p params) (Result, error) {
	if err := activateAll(t, p.grains); err != nil {
		return Result{}, err
	}
	per := p.msgs / p.callers
	return runCallers(t, p, per, func(c int, ask caller) ([]time.Duration, error) {
		r := rand.New(rand.NewPCG(uint64(c), 3))
		mine := make([]time.Duration, 0, per/8+1)
		for i := range per {
			k := int64(r.IntN(p.grains))
			if i%8 == 0 { // sample one call in eight
				t0 := time.Now()
				_, err := ask(k, askMsg)
				mine = append(mine, time.Since(t0))
				if err != nil {
					return mine, err
				}
				continue
			}
			if _, err := ask(k, askMsg); err != nil {
				return mine, err
			}
		}
		return mine, nil
	})
}

// caller is one caller's Ask (target.Caller).
type caller = func(key int64, m *bmsg) (int, error)

// runCallers runs p.callers goroutines, each with its own caller, each
// making per calls in body and returning
// the durations it timed; then it checks the grains' totals (each
// activated with one call before) and gives the calls a second and the
// percentiles of those timed. A caller's timings are its own until it
// returns: appended to a slice of the callers' in place, their headers —
// 24 bytes each, side by side — shared lines across the cores, a miss for
// each sample of every implementation's.
func runCallers(t target, p params, per int, body func(c int, ask caller) ([]time.Duration, error)) (Result, error) {
	lat := make([][]time.Duration, p.callers)
	errs := make(chan error, p.callers)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range p.callers {
		ask := t.Caller()
		wg.Go(func() {
			mine, err := body(c, ask)
			lat[c] = mine
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, err
	}
	sum, err := total(t, p.grains)
	if err != nil {
		return Result{}, err
	}
	p50, p99 := percentiles(slices.Concat(lat...))
	calls := per * p.callers
	return Result{OpsPerSec: float64(calls) / el.Seconds(), P50us: p50, P99us: p99}, check(sum, p.grains+calls)
}

func runActivate(t target, p params) (Result, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for k := range p.msgs {
		if err := t.Tell(int64(k), signalMsg); err != nil {
			return Result{}, err
		}
	}
	if err := waitHandled(p, int64(p.msgs), t.Signals, 100*time.Microsecond); err != nil {
		return Result{}, err
	}
	el := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(p.msgs)
	// One more message to each of a sample: every activation is still there.
	for k := 0; k < p.msgs; k += p.msgs / 100 {
		n, err := t.Ask(int64(k), peekMsg)
		if err != nil {
			return Result{}, err
		}
		if n != 1 {
			return Result{}, fmt.Errorf("grain %d counted %d, want 1", k, n)
		}
	}
	return Result{OpsPerSec: float64(p.msgs) / el.Seconds(), BytesPerActivation: per - float64(t.StateSize())}, nil
}

func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	us := func(x time.Duration) float64 { return float64(x) / float64(time.Microsecond) }
	return us(d[len(d)*50/100]), us(d[len(d)*99/100])
}
