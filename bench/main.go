// Command bench measures Granary against protoactor-go and against "raw", the
// plain-Go floor of the same design, on the same workloads with the same
// checks. Each run is a fresh child process; each workload and
// implementation runs three times; one JSON line per run is printed,
// followed by a Markdown table of medians.
//
//	cd bench && go run . [-workload NAME|all] [-quick]
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Result is one run's outcome, printed as one JSON line. LineRTTns is the
// machine's state as the run began: a cache line's round trip between two
// cores, in ns (probe.go); 0 with one P.
type Result struct {
	Workload  string  `json:"workload"`
	Impl      string  `json:"impl"`
	Run       int     `json:"run"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50us     float64 `json:"p50_us,omitempty"`
	P99us     float64 `json:"p99_us,omitempty"`
	// steady and relay: their calls timed from when the caller's
	// goroutine began each, not from its arrival (steady.go)
	RunP50us float64 `json:"run_p50_us,omitempty"`
	RunP99us float64 `json:"run_p99_us,omitempty"`
	// steady and relay: their calls that arrived past the process's
	// warm-up (steady.go, warmUp), timed from arrival
	WarmP50us          float64 `json:"warm_p50_us,omitempty"`
	WarmP99us          float64 `json:"warm_p99_us,omitempty"`
	BytesPerActivation float64 `json:"bytes_per_activation,omitempty"`
	LineRTTns          float64 `json:"line_rtt_ns,omitempty"`
	// tell and zipf: the check's read of every grain's count, timed again
	// once all is idle, and taken off the run's time (timedTells)
	CheckReadMs float64        `json:"check_read_ms,omitempty"`
	Params      map[string]any `json:"params"`
	Error       string         `json:"error,omitempty"`
}

var impls = []string{"granary", "protoactor", "raw"}

func main() {
	workload := flag.String("workload", "all", "workload to run: "+strings.Join(workloadNames(), ", ")+", or all")
	quick := flag.Bool("quick", false, "shrink every workload so the whole set runs in under a minute")
	runs := flag.Int("runs", 3, "runs per workload and implementation")
	child := flag.Bool("child", false, "internal: run one workload in this process")
	impl := flag.String("impl", "", "internal: the implementation a child runs; or restrict the parent to one")
	run := flag.Int("run", 0, "internal: the run number")
	cpuprofile := flag.String("cpuprofile", "", "with -child: write a CPU profile here")
	traceTo := flag.String("trace", "", "with -child: write an execution trace of the workload here (go tool trace)")
	childTimeout := flag.Duration("timeout", 10*time.Minute, "kill a run that takes longer than this, and count it failed")
	rate := flag.Int("rate", 0, "calls a second for the paced workloads (steady, relay), each run as long as at its own rate; 0: their own (50,000 and 20,000)")
	flag.Parse()
	if *child {
		if flag.NArg() > 0 {
			fmt.Fprintf(os.Stderr, "bench: unexpected argument %q\n", flag.Arg(0))
			os.Exit(2)
		}
		// The machine's state first, out of the profile and the workload.
		rtt, _ := machineState()
		stop, err := capture(*cpuprofile, *traceTo)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		r := runChild(*workload, *impl, *quick, *rate)
		r.Run = *run
		r.LineRTTns = float64(rtt.Nanoseconds())
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		stop()
		if r.Error != "" {
			os.Exit(1)
		}
		return
	}
	names, err := parentArgs{
		workload: *workload, impl: *impl, runs: *runs, rate: *rate, timeout: *childTimeout,
		extra: flag.Args(), profiled: *cpuprofile != "" || *traceTo != "",
	}.check()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	var all []Result
	var failed []string // the runs that failed, each with why
	// Runs are interleaved (run 1 of each implementation, then run 2, ...)
	// so that a change in the machine's load over time affects every
	// implementation alike: only ratios measured in one run count. The
	// order within a run rotates from one run to the next, so that no
	// implementation always runs first, or always right after another (on
	// a machine whose speed drifts, a fixed order biases the ratios).
	for _, w := range names {
		for r := 1; r <= *runs; r++ {
			for _, im := range rotated(impls, r-1) {
				if *impl != "" && im != *impl {
					continue
				}
				if workloads[w][im] == nil {
					continue
				}
				args := []string{"-child", "-workload", w, "-impl", im, "-run", fmt.Sprint(r)}
				if *quick {
					args = append(args, "-quick")
				}
				if *rate > 0 && takesRate(w) {
					args = append(args, "-rate", fmt.Sprint(*rate))
				}
				// A run that hangs is killed and counted failed: the whole
				// set never hangs, whatever one implementation does.
				ctx, cancel := context.WithTimeout(context.Background(), *childTimeout)
				cmd := exec.CommandContext(ctx, exe, args...)
				var out bytes.Buffer
				cmd.Stdout = &out
				cmd.Stderr = os.Stderr
				err := cmd.Run()
				timedOut := ctx.Err() != nil
				cancel()
				line := lastLine(out.String())
				if timedOut {
					line = fmt.Sprintf(`{"workload":%q,"impl":%q,"run":%d,"error":"killed after -timeout %v"}`, w, im, r, *childTimeout)
				}
				fmt.Println(line)
				var res Result
				jerr := json.Unmarshal([]byte(line), &res)
				if jerr != nil || err != nil {
					failed = append(failed, failure(w, im, r, res, cmp.Or(err, jerr)))
					continue
				}
				all = append(all, res)
			}
		}
	}
	fmt.Println()
	fmt.Print(table(all))
	fmt.Printf("\n%s, GOMAXPROCS=%d, %s/%s, quick=%v\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, *quick)
	fmt.Print(machineStates(all))
	fmt.Print(roundRatios(all))
	fmt.Print(runTimes(all))
	fmt.Print(warmTimes(all))
	fmt.Print(targets(all, *quick))
	if len(failed) > 0 {
		fmt.Print(failedRuns(failed))
		fmt.Fprintln(os.Stderr, "bench: some runs failed")
		os.Exit(1)
	}
}

// failure says which run failed, and why: the error its JSON line gives (a
// lost message, a stall, a kill at -timeout), or else how the child ended.
func failure(w, im string, r int, res Result, err error) string {
	why := res.Error
	if why == "" && err != nil {
		why = err.Error()
	}
	return fmt.Sprintf("%s %s run %d (%s)", w, im, r, why)
}

// failedRuns is the footer's last line when runs failed: they are left out
// of the table, the ratios and the targets, whose verdicts then rest on
// fewer rounds — and a failed Granary run is itself a miss, whatever the
// targets line says.
func failedRuns(failed []string) string {
	return fmt.Sprintf("FAILED, left out of the table, the ratios and the targets: %s\n", strings.Join(failed, "; "))
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			last = t
		}
	}
	return last
}

// median is the middle of xs, or the mean of the two middles when there
// is an even number of them (-runs 2 or 4); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}

// table prints medians per workload and implementation. The ratio columns
// are the median, over runs, of the ratio of this implementation's
// throughput to protoactor's and to raw's in the same run: runs are
// interleaved, so each ratio compares measurements taken side by side.
func table(rs []Result) string {
	type key struct{ w, i string }
	ops, p50, p99, bpa := map[key][]float64{}, map[key][]float64{}, map[key][]float64{}, map[key][]float64{}
	byRun, order := opsByRun(rs)
	for _, r := range rs {
		k := key{r.Workload, r.Impl}
		ops[k] = append(ops[k], r.OpsPerSec)
		p50[k] = append(p50[k], r.P50us)
		p99[k] = append(p99[k], r.P99us)
		bpa[k] = append(bpa[k], r.BytesPerActivation)
	}
	var b strings.Builder
	b.WriteString("| workload | impl | ops/s (median) | vs protoactor | vs raw | p50 µs | p99 µs | bytes/activation |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range order {
		for _, im := range impls {
			k := key{w, im}
			if len(ops[k]) == 0 {
				continue
			}
			ratio := func(other string) string {
				r, ok := medianRatio(byRun, w, im, other)
				if !ok {
					return "–"
				}
				return fmt.Sprintf("%.2fx", r)
			}
			opt := func(v float64, f string) string {
				if v == 0 {
					return "–"
				}
				return fmt.Sprintf(f, v)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %s |\n", w, im, median(ops[k]), ratio("protoactor"), ratio("raw"),
				opt(median(p50[k]), "%.1f"), opt(median(p99[k]), "%.1f"), opt(median(bpa[k]), "%.0f"))
		}
	}
	return b.String()
}

// rotated returns xs rotated left by n places: run r of a workload takes
// the implementations in the order rotated(impls, r-1), so that over
// len(impls) runs each one runs once in each place.
func rotated(xs []string, n int) []string {
	n %= len(xs)
	return append(slices.Clone(xs[n:]), xs[:n]...)
}

// implsOf lists the implementations workload w runs, in impls' order.
func implsOf(w string) []string {
	var have []string
	for _, im := range impls {
		if workloads[w][im] != nil {
			have = append(have, im)
		}
	}
	return have
}

// machineStates says, for each workload, the range of the machine's states
// its runs began in (Result.LineRTTns): a ratio between runs in different
// states says more about the machine than about the implementations.
func machineStates(rs []Result) string {
	byW := map[string][]float64{}
	var order []string
	for _, r := range rs {
		if r.LineRTTns <= 0 {
			continue
		}
		if _, ok := byW[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		byW[r.Workload] = append(byW[r.Workload], r.LineRTTns)
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("a cache line's round trip between two cores as each run began, ns (probe.go):")
	for i, w := range order {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s %.0f–%.0f", w, slices.Min(byW[w]), slices.Max(byW[w]))
	}
	return b.String() + "\n"
}
