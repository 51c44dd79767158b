// Command chaos runs a silo through a storm of calls and checks that the
// runtime keeps its promises: every message handled or a dead letter, none
// handled twice, each grain's begun in the order they were sent (ledger.order),
// no ask left waiting for its deadline. Grains of every way
// of letting messages in (plain, reentrant, WithMayInterleave, stateless
// worker, call-chain reentrancy) call and tell each other down random chains,
// fan out, panic, deactivate themselves; their OnActivate, OnDeactivate
// and timer ticks call other grains; caps on activations and memory
// shedding evict them under way. A deadlock the runtime does not fail
// shows up as an ask that timed out, and the run fails.
//
//	cd bench && go run ./chaos [-keys 4] [-fan 8] [-panic 30] [-hookcall 3] ...
//
// It prints one line of what became of the run's messages and exits 1 if a
// promise was broken. When an ask first times out, or nothing moves for
// -dumpafter, it writes the asks under way and every goroutine's stack to
// a file, once, to show where the run is stuck.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// config is one run's settings; the flags set them.
type config struct {
	seed           uint64
	msgs           int           // hops sent from outside
	clients        int           // goroutines sending them
	keys           int           // keys of each kind
	depth          int           // the longest chain a hop from outside starts
	fan            int           // the most calls one turn makes at once (1: no fan-out)
	panicEvery     int           // a hop's turn panics one time in this many (0: never)
	deactEvery     int           // a hop's turn asks to deactivate one time in this many
	tellEvery      int           // a hop is a tell one time in this many
	hookCallEvery  int           // an OnDeactivate calls out one time in this many
	actCallEvery   int           // an OnActivate calls out one time in this many
	hookWait       time.Duration // each OnActivate and OnDeactivate waits this long first, as for a store
	backlog        int           // every kind's backlog limit, RejectNewest (0: the silo's default)
	tickEvery      int           // an activation starts a timer one time in this many
	tickPeriod     time.Duration // its period
	stopEvery      int           // a hop's turn, or a client before its hop, stops a random grain (Silo.Stop) one time in this many (0: never)
	deactOutEvery  int           // the same with Silo.Deactivate
	shutdownAt     int           // Shutdown once this many hops were sent from outside, the clients still sending (0: once they are done)
	actFailEvery   int           // an OnActivate fails one time in this many (0: never)
	actHangEvery   int           // an OnActivate hangs past actTimeout one time in this many (0: never)
	actTimeout     time.Duration // Config.ActivationTimeout, with actHangEvery
	deactHangEvery int           // an OnDeactivate hangs past hookTimeout one time in this many (0: never)
	supervise      string        // the kinds' failure policy: restart, resume, stop or strict
	observers      int           // observers the hops may go to (0: none), the first closed halfway through the clients' hops
	obsEvery       int           // a hop goes to an observer one time in this many
	obsBuffer      int           // each observer's buffer
	partitions     int
	maxActs        int           // Config.MaxActivations
	shed           bool          // memory shedding at every idle tick
	idle           time.Duration // the kinds' idle timeout
	hookTimeout    time.Duration // Config.DeactivationTimeout
	deadline       time.Duration // each ask's from outside
	dumpAfter      time.Duration // write the goroutines' stacks after this long without progress
	dumpTo         string
	logs           bool   // the silo's log lines to stderr
	kinds          string // the kinds registered, of allKinds
	awaitEvery     int    // a hop's turn waits in silo.Await one time in this many (0: never)
}

func defaults() config {
	return config{
		seed: 1, msgs: 3000, clients: 32, keys: 4, depth: 3, fan: 4,
		panicEvery: 30, deactEvery: 20, tellEvery: 4,
		hookCallEvery: 3, actCallEvery: 4, tickEvery: 3, tickPeriod: 2 * time.Millisecond,
		partitions: 2, idle: 20 * time.Millisecond, hookTimeout: 5 * time.Second,
		deadline: 10 * time.Second, dumpAfter: 8 * time.Second, kinds: defaultKinds,
		obsEvery: 8, obsBuffer: 8, supervise: "restart", actTimeout: 25 * time.Millisecond,
	}
}

func main() {
	cfg := defaults()
	flag.Uint64Var(&cfg.seed, "seed", cfg.seed, "the run's random seed")
	flag.IntVar(&cfg.msgs, "msgs", cfg.msgs, "hops sent from outside")
	flag.IntVar(&cfg.clients, "clients", cfg.clients, "goroutines sending them")
	flag.IntVar(&cfg.keys, "keys", cfg.keys, "keys of each kind: fewer keys, more cycles")
	flag.IntVar(&cfg.depth, "depth", cfg.depth, "the longest chain of calls a hop from outside starts")
	flag.IntVar(&cfg.fan, "fan", cfg.fan, "the most calls a turn makes at once, one turn in two (1: none at once)")
	flag.IntVar(&cfg.panicEvery, "panic", cfg.panicEvery, "a turn panics one time in this many (0: never)")
	flag.IntVar(&cfg.deactEvery, "deact", cfg.deactEvery, "a turn asks to deactivate its grain one time in this many (0: never)")
	flag.IntVar(&cfg.tellEvery, "tell", cfg.tellEvery, "a hop is a tell, not an ask, one time in this many")
	flag.IntVar(&cfg.hookCallEvery, "hookcall", cfg.hookCallEvery, "an OnDeactivate calls other grains one time in this many (0: never)")
	flag.IntVar(&cfg.actCallEvery, "actcall", cfg.actCallEvery, "an OnActivate calls other grains one time in this many (0: never)")
	flag.IntVar(&cfg.backlog, "backlog", cfg.backlog, "every kind's backlog limit (WithMaxBacklog, RejectNewest): a grain's senders wait at its door, or are refused, and what was on its way is dropped as overload (0: the silo's default)")
	flag.DurationVar(&cfg.hookWait, "hookwait", cfg.hookWait, "each OnActivate and OnDeactivate first blocks this long, as a load or a save at a store would: hooks that block run off their partition (0: none)")
	flag.IntVar(&cfg.tickEvery, "tickcall", cfg.tickEvery, "an activation starts a timer whose ticks call other grains one time in this many (0: never)")
	flag.DurationVar(&cfg.tickPeriod, "tickperiod", cfg.tickPeriod, "the timers' period")
	flag.IntVar(&cfg.stopEvery, "stop", cfg.stopEvery, "a hop's turn, or a client before sending a hop, stops a random grain (Silo.Stop) one time in this many (0: never)")
	flag.IntVar(&cfg.shutdownAt, "shutdownat", cfg.shutdownAt, "shut the silo down once this many hops were sent from outside, its clients still sending: what it took must be handled or be dead letters, what comes after is refused (0: once the storm is done)")
	flag.IntVar(&cfg.actFailEvery, "actfail", cfg.actFailEvery, "an OnActivate returns an error one time in this many, as with its storage down (0: never)")
	flag.IntVar(&cfg.actHangEvery, "acthang", cfg.actHangEvery, "an OnActivate hangs past -acttimeout one time in this many, as with its storage stuck: half end when the silo gives up on them, half ignore it (0: never)")
	flag.DurationVar(&cfg.actTimeout, "acttimeout", cfg.actTimeout, "with -acthang, Config.ActivationTimeout (without, the library's default)")
	flag.IntVar(&cfg.deactHangEvery, "deacthang", cfg.deactHangEvery, "an OnDeactivate hangs past -hooktimeout one time in this many, as with its save stuck: half end with their ctx, half ignore it for three times the bound (0: never; give it a short -hooktimeout)")
	flag.StringVar(&cfg.supervise, "supervise", cfg.supervise, "the kinds' failure policy after a panic or a failed activation: restart (the library's defaults), resume, stop (quarantined 50 ms), strict (no restart: the first failure stops)")
	flag.IntVar(&cfg.observers, "observers", cfg.observers, "observers (Silo.NewObserver) the hops may be told to, each read by a goroutine of its own; the first is closed halfway through the clients' hops (0: none)")
	flag.IntVar(&cfg.obsEvery, "obsevery", cfg.obsEvery, "with -observers, a hop is a tell to an observer one time in this many")
	flag.IntVar(&cfg.obsBuffer, "obsbuffer", cfg.obsBuffer, "with -observers, each observer's buffer: a tell to a full one is refused, a dead letter")
	flag.IntVar(&cfg.deactOutEvery, "deactout", cfg.deactOutEvery, "a hop's turn, or a client before sending a hop, deactivates a random grain from outside it (Silo.Deactivate) one time in this many (0: never)")
	flag.IntVar(&cfg.partitions, "partitions", cfg.partitions, "Config.Partitions")
	flag.IntVar(&cfg.maxActs, "cap", cfg.maxActs, "Config.MaxActivations (0: no cap)")
	flag.BoolVar(&cfg.shed, "shed", cfg.shed, "shed activations at every idle tick, as under memory pressure")
	flag.DurationVar(&cfg.idle, "idle", cfg.idle, "the kinds' idle timeout")
	flag.DurationVar(&cfg.hookTimeout, "hooktimeout", cfg.hookTimeout, "Config.DeactivationTimeout: a hook's call still out when it ends is cut off with it, counted apart (deactivate:hook-bound), not as an ask left to its deadline")
	flag.DurationVar(&cfg.deadline, "deadline", cfg.deadline, "each ask's deadline: one that passes is a deadlock nothing failed, or an ask that slow (the summary's slowest of the rest near it says so; a deadlock outlasts any deadline)")
	flag.DurationVar(&cfg.dumpAfter, "dumpafter", cfg.dumpAfter, "write the asks under way and every goroutine's stack after this long without progress (or at the first ask timed out, whichever is first)")
	flag.StringVar(&cfg.dumpTo, "dump", filepath.Join(os.TempDir(), "chaos_dump.txt"), "where to write them")
	flag.BoolVar(&cfg.logs, "logs", cfg.logs, "the silo's log lines to stderr")
	flag.StringVar(&cfg.kinds, "kinds", cfg.kinds, "the kinds the run registers and calls, a comma-separated list of "+allKinds)
	flag.IntVar(&cfg.awaitEvery, "await", cfg.awaitEvery, "a hop's turn waits in silo.Await one time in this many — on a timer of up to 200 µs, or around its own calls (0: never)")
	flag.Parse()

	start := time.Now()
	v, err := runChaos(context.Background(), cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	fmt.Printf("chaos seed %d: %v (%.1fs)\n", cfg.seed, v, time.Since(start).Seconds())
	if !v.ok() {
		os.Exit(1)
	}
}

// run is one chaos run: its settings and its ledger.
type run struct {
	cfg   config
	kinds []string
	led   *ledger
	s     *silo.Silo       // for Stop and Deactivate, which a grain's Runtime does not offer
	obs   []*silo.Observer // with -observers
	// sent counts the hops sent from outside; the one numbered
	// cfg.shutdownAt begins the Shutdown (or the storm's end does), whose
	// result comes on shut
	sent      atomic.Int64
	beginShut func()
	shut      chan error
	log       io.Writer
	dumped    atomic.Bool // the dump is written once: at a stall, or the first ask timed out
}

// runChaos runs one storm on a silo of its own and gives the ledger's
// verdict once the silo has shut down; an error is a run that could not be
// set up or shut down. log gets the silo's lines with cfg.logs, and a
// stall's dump's path.
func runChaos(ctx context.Context, cfg config, log io.Writer) (verdict, error) {
	if cfg.keys < 1 || cfg.clients < 1 || cfg.tellEvery < 1 || cfg.fan < 1 || (cfg.observers > 0 && cfg.obsEvery < 1) ||
		min(cfg.depth, cfg.stopEvery, cfg.deactOutEvery, cfg.shutdownAt, cfg.actFailEvery, cfg.actHangEvery, cfg.deactHangEvery, cfg.observers, cfg.awaitEvery) < 0 ||
		(cfg.actHangEvery > 0 && cfg.actTimeout <= 0) || (cfg.deactHangEvery > 0 && cfg.hookTimeout <= 0) || cfg.hookWait < 0 || cfg.backlog < 0 {
		return verdict{}, errors.New("-keys, -clients, -tell and -fan (and -obsevery with -observers, -acttimeout with -acthang, -hooktimeout with -deacthang) must be at least 1, -depth, -stop, -deactout, -shutdownat, -actfail, -acthang, -deacthang, -observers, -await, -hookwait and -backlog at least 0")
	}
	r := &run{cfg: cfg, kinds: strings.Split(cfg.kinds, ","), led: newLedger(), log: log}
	for _, k := range r.kinds {
		if !slices.Contains(strings.Split(allKinds, ","), k) {
			return verdict{}, fmt.Errorf("-kinds: no kind %q; the kinds are %s", k, allKinds)
		}
	}
	logger := slog.New(slog.DiscardHandler)
	if cfg.logs {
		logger = slog.New(slog.NewTextHandler(log, nil))
	}
	sc := silo.Config{
		Partitions:          cfg.partitions,
		IdleTimeout:         cfg.idle,
		DeactivationTimeout: cfg.hookTimeout,
		MaxActivations:      cfg.maxActs,
		Logger:              logger,
	}
	if cfg.actHangEvery > 0 {
		sc.ActivationTimeout = cfg.actTimeout
	}
	if cfg.shed {
		sc.MemoryLimit = 1
		sc.MemoryGauge = silo.MemoryGaugeFunc(func() uint64 { return 2 }) // always past the limit
	}
	s, err := silo.New(sc)
	if err != nil {
		return verdict{}, err
	}
	defer s.Close()
	r.s = s
	if err := r.register(s); err != nil {
		return verdict{}, err
	}
	for range cfg.observers {
		o, err := s.NewObserver(cfg.obsBuffer)
		if err != nil {
			return verdict{}, err
		}
		r.obs = append(r.obs, o)
	}
	dl := s.SubscribeDeadLetters(silo.MaxDeadLetterBuffer)
	if err := s.Start(); err != nil {
		return verdict{}, err
	}
	var readers sync.WaitGroup
	for _, o := range r.obs {
		readers.Go(func() {
			for n := range o.C() { // closed once o is, or the silo has stopped, and read out
				if h, ok := n.Msg.(hop); ok {
					r.led.observed(h.ID)
				}
			}
		})
	}
	readers.Go(func() {
		for d := range dl.C {
			if h, ok := d.Msg.(hop); ok {
				r.led.deadLetter(h.ID, d.Reason.String())
			}
		}
	})
	stop := make(chan struct{})
	readers.Go(func() { r.watch(stop) })

	// The Shutdown's time counts from when it begins, not from before the
	// storm: a storm of slow asks (-fan 8 -depth 5: 15–19 s) left it a
	// second or two, and it failed as if stuck.
	shutBound := 2*cfg.hookTimeout + 10*time.Second
	r.shut = make(chan error, 1)
	r.beginShut = sync.OnceFunc(func() {
		go func() {
			sctx, cancel := context.WithTimeout(ctx, shutBound)
			defer cancel()
			// A Shutdown still under way near its deadline: what it waits
			// for, while it does.
			late := time.AfterFunc(shutBound-2*time.Second, func() {
				r.dumpOnce(fmt.Sprintf("Shutdown still under way after %v", shutBound-2*time.Second))
			})
			defer late.Stop()
			r.shut <- s.Shutdown(sctx)
		}()
	})

	r.storm(ctx, s)

	r.beginShut() // if -shutdownat has not
	serr := <-r.shut
	close(stop)
	readers.Wait() // dl.C closes once the silo has stopped
	if serr != nil {
		return verdict{}, fmt.Errorf("shutdown: %w", serr)
	}
	if n := dl.Dropped(); n > 0 {
		return verdict{}, fmt.Errorf("%d dead letters dropped by the subscription: the ledger cannot account for them", n)
	}
	return r.led.verdict(), nil
}

// register registers the run's kinds.
func (r *run) register(s *silo.Silo) error {
	opts := map[string][]silo.KindOption{
		"reent": {silo.WithReentrant()},
		"mayin": {silo.WithMayInterleave(mayInterleave)},
		"sw":    {silo.WithStatelessWorker(0)},
		"swre":  {silo.WithStatelessWorker(0), silo.WithReentrant()},
		"blk":   {silo.WithBlockingTurns()},
		"reblk": {silo.WithReentrant(), silo.WithBlockingTurns()},
		"swblk": {silo.WithStatelessWorker(0), silo.WithBlockingTurns()},
	}
	sup, err := supervision(r.cfg.supervise)
	if err != nil {
		return err
	}
	if r.cfg.backlog > 0 {
		sup = append(sup, silo.WithMaxBacklog(r.cfg.backlog, silo.RejectNewest))
	}
	for _, k := range r.kinds {
		if err := silo.Register(s, k, r.newGrain, append(opts[k], sup...)...); err != nil {
			return err
		}
	}
	return nil
}

// supervision is the kinds' failure policy for -supervise: the library's
// defaults (restart, at most 10 in 10 s), resume (a failed turn leaves the
// grain as it was), stop (quarantined for 50 ms: the storm goes on around
// it) or strict (the first failure's restart stops it, as stop does).
func supervision(mode string) ([]silo.KindOption, error) {
	const quarantine = 50 * time.Millisecond
	decide := func(d activation.Directive) activation.Decider {
		return activation.DeciderFunc(func(grain.ID, error) activation.Directive { return d })
	}
	switch mode {
	case "restart":
		return nil, nil
	case "resume":
		return []silo.KindOption{silo.WithSupervision(activation.Supervision{Decider: decide(activation.Resume)})}, nil
	case "stop":
		return []silo.KindOption{silo.WithSupervision(activation.Supervision{Decider: decide(activation.Stop), Quarantine: quarantine})}, nil
	case "strict":
		return []silo.KindOption{silo.WithSupervision(activation.Supervision{MaxRestarts: -1, Quarantine: quarantine})}, nil
	}
	return nil, fmt.Errorf("-supervise: no mode %q; the modes are restart, resume, stop and strict", mode)
}

// storm sends cfg.msgs hops from outside, from cfg.clients goroutines,
// and returns once every ask among them has ended.
func (r *run) storm(ctx context.Context, s *silo.Silo) {
	var wg sync.WaitGroup
	per := (r.cfg.msgs + r.cfg.clients - 1) / r.cfg.clients
	for c := range r.cfg.clients {
		n := min(per, r.cfg.msgs-c*per)
		if n <= 0 {
			break
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(r.cfg.seed, uint64(c)+1<<32))
			for range n {
				sent := r.sent.Add(1)
				if sent == int64(r.cfg.shutdownAt) {
					r.beginShut() // the clients go on sending
				}
				if sent == int64(r.cfg.msgs/2) && len(r.obs) > 0 {
					r.obs[0].Close() // a client gone: what it held, and what comes for it, are dead letters
				}
				r.control(ctx, rng)
				to, tell := r.target(rng)
				h := hop{ID: r.led.send(tell, to, 0, "client (0) -> "+to.String()), Depth: rng.IntN(r.cfg.depth + 1), Seed: rng.Uint64()}
				actx, cancel := context.WithTimeout(ctx, r.cfg.deadline)
				r.send(actx, s, "client", 0, to, h, tell, "")
				cancel()
			}
		})
	}
	wg.Wait()
}

// watch writes the dump (dumpOnce), unless a timeout wrote it first, when
// nothing has moved for cfg.dumpAfter, until stop closes.
func (r *run) watch(stop <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last, since := r.led.progress.Load(), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if p := r.led.progress.Load(); p != last {
				last, since = p, now
				continue
			}
			if now.Sub(since) < r.cfg.dumpAfter {
				continue
			}
			r.dumpOnce(fmt.Sprintf("nothing moved for %v", r.cfg.dumpAfter))
			return
		}
	}
}

// dumpOnce writes the dump, why saying what for, unless it was written.
func (r *run) dumpOnce(why string) {
	if !r.dumped.CompareAndSwap(false, true) {
		return
	}
	if err := r.dump(); err != nil {
		fmt.Fprintf(r.log, "chaos: %s; its dump: %v\n", why, err)
		return
	}
	fmt.Fprintf(r.log, "chaos: %s; the asks under way and every goroutine's stack: %s\n", why, r.cfg.dumpTo)
}

// dump writes the asks under way, then every goroutine's stack.
func (r *run) dump() error {
	f, err := os.Create(r.cfg.dumpTo)
	if err != nil {
		return err
	}
	r.led.writeFlights(f)
	fmt.Fprintln(f)
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
