// Command game is Granary's example game backend: players, a lobby that
// pairs them, matches that play on a timer and ask a referee (a stateless
// worker: one identity, an activation per partition) who won, and a
// leaderboard — each a grain on a silo embedded in this program. Clients
// follow a player's matches through an observer the player tells. A
// player's record outlives its activation: OnActivate loads it from a
// Records store and OnDeactivate saves it, as an Orleans grain reads and
// writes its persistent state (in memory here, each load and save waiting
// -store-latency first, 1 ms by default, as a database's round trip would:
// a plain blocking call, which the silo runs off the partition once it
// sees hooks block; a database behind the same two methods in a real
// deployment).
//
// By default it simulates bots for a while and prints a summary:
//
//	go run ./examples/game [-players 200] [-duration 2s] [-store-latency 1ms]
//
// With -http it serves the game instead, until interrupted (SIGINT or
// SIGTERM), then shuts its silo down gracefully:
//
//	go run ./examples/game -http localhost:8080
//	curl -X POST localhost:8080/players/alice/join
//	curl localhost:8080/players/alice
//	curl -N localhost:8080/players/alice/events   # her matches as they happen
//	curl localhost:8080/players
//	curl localhost:8080/leaderboard
//	curl localhost:8080/metrics
//	curl localhost:8080/metrics/calls
//	curl -o cpu.pb.gz 'localhost:8080/debug/profile?d=10s' && go tool pprof -tags cpu.pb.gz
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

func main() {
	players := flag.Int("players", 200, "bots to simulate")
	duration := flag.Duration("duration", 2*time.Second, "how long the bots play")
	match := flag.Duration("match", 20*time.Millisecond, "how long a match lasts")
	addr := flag.String("http", "", "serve the HTTP API on this address instead of simulating")
	latency := flag.Duration("store-latency", time.Millisecond, "how long each load and save of a player's record waits, as a database's round trip (simulating)")
	flag.Parse()
	err := checkFlags(*players, *duration, *match, flag.Args())
	if err == nil {
		err = checkLatency(*latency)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "game:", err)
		flag.Usage()
		os.Exit(2)
	}

	// SIGTERM too: what a container runtime, systemd or Kubernetes sends
	// to stop a service — the silo's graceful Shutdown runs for it as for
	// an interrupt, and the players' records are saved.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *addr != "" {
		err = serve(ctx, *addr, *match)
	} else {
		var sum summary
		sum, err = simulate(ctx, *players, *duration, *match, *latency)
		if err == nil {
			fmt.Print(sum)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "game:", err)
		os.Exit(1)
	}
}

// checkFlags refuses what the simulation cannot run with, before anything
// starts: a bot retries every half match, so a match takes a millisecond at
// least. It takes no arguments besides the flags: `game 500` would
// otherwise play with the default 200 bots, saying nothing.
func checkFlags(players int, duration, match time.Duration, args []string) error {
	switch {
	case len(args) > 0:
		return fmt.Errorf("unexpected argument %q: the game takes flags only", args[0])
	case players < 0:
		return fmt.Errorf("-players %d: not negative", players)
	case duration < 0:
		return fmt.Errorf("-duration %v: not negative", duration)
	case match < time.Millisecond:
		return fmt.Errorf("-match %v: a millisecond at least", match)
	}
	return nil
}

// checkLatency refuses a negative -store-latency.
func checkLatency(latency time.Duration) error {
	if latency < 0 {
		return fmt.Errorf("-store-latency %v: not negative", latency)
	}
	return nil
}

// newGame starts a silo with the game's grains, their records kept in
// records, a meter of their turns around every one (a filter: the grains
// know nothing of it) and of what they send each other (a send filter). The silo logs to logger (nil: slog.Default()) what
// it cannot return to anyone: a tell that failed or became a dead letter,
// a slow turn, a record that could not be saved.
func newGame(match time.Duration, logger *slog.Logger, records Records) (*silo.Silo, *turnMeter, error) {
	return newGameWith(silo.Config{}, nil, match, logger, records)
}

// newGameWith is newGame on a silo configured as cfg (plus the meter, the
// logger and profile labels), its lobby registered with the options lobby.
func newGameWith(cfg silo.Config, lobby []silo.KindOption, match time.Duration, logger *slog.Logger, records Records) (*silo.Silo, *turnMeter, error) {
	meter := newTurnMeter(kindPlayer, kindLobby, kindMatch, kindLeaderboard, kindReferee)
	cfg.Filters, cfg.Logger, cfg.ProfileLabels = []grain.Filter{meter}, logger, true
	cfg.SendFilters = []grain.SendFilter{meter.calls}
	s, err := silo.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := register(s, match, records, lobby...); err != nil {
		return nil, nil, err
	}
	return s, meter, s.Start()
}

type summary struct {
	Players, Matches, Wins, Losses int
	Top                            []Entry
	Stats                          silo.Stats
	Turns                          []KindTurns
	Calls                          []KindCalls
	DeadLetters                    int
	// Saved is the wins in the players' records after the shutdown, which
	// each player saved as it deactivated; Latency each save's wait at the
	// store, and ShutdownTook the graceful Shutdown's whole time.
	Saved        int
	Latency      time.Duration
	ShutdownTook time.Duration
	// Watched is the player a spectator followed (an observer), and
	// Events how many of its events the spectator received.
	Watched string
	Events  int
}

func (s summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "players: %d, matches: %d, wins: %d, losses: %d\n", s.Players, s.Matches, s.Wins, s.Losses)
	b.WriteString("top 5:")
	for _, e := range s.Top {
		fmt.Fprintf(&b, " %s (%d)", e.Player, e.Wins)
	}
	active := 0
	for _, n := range s.Stats.Activations {
		active += n
	}
	fmt.Fprintf(&b, "\nsilo: %d activations at the end, %d turns, %d handoffs, %d dead letters",
		active, s.Stats.Handled, s.Stats.Handoffs, s.DeadLetters)
	if s.DeadLetters > 0 {
		b.WriteString(" (by reason:")
		for r := range grain.Reason(grain.NumReasons) {
			if n := s.Stats.DeadLetters[r]; n > 0 {
				fmt.Fprintf(&b, " %v %d", r, n)
			}
		}
		b.WriteString(")")
	}
	b.WriteString("; deactivations by reason:")
	for r := range grain.DeactivationReason(grain.NumDeactivationReasons) {
		if n := s.Stats.Deactivations[r]; n > 0 {
			fmt.Fprintf(&b, " %v %d", r, n)
		}
	}
	if len(s.Stats.Deactivations) == 0 {
		b.WriteString(" none")
	}
	b.WriteString("\n")
	b.WriteString("message turns by kind:")
	for i, k := range s.Turns {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %v", k)
	}
	b.WriteString("\nwhat grains sent each other, as their senders saw it (a send filter):")
	for i, c := range s.Calls {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %v", c)
	}
	b.WriteString("\n(a player's errors are Joins refused with ErrBusy: each bot asks again every half match while it is queued or playing")
	if n := s.Stats.DeadLetters[grain.ReasonOverload]; n > 0 {
		fmt.Fprintf(&b, "; and %d refused because the lobby's backlog was full — backpressure under a flood of bots, each a dead letter, reason overload; the bot asks again later", n)
	}
	b.WriteString(")\n")
	fmt.Fprintf(&b, "records saved by the players as the silo shut down (OnDeactivate): %d wins", s.Saved)
	if s.Latency > 0 {
		// Each save blocks at the store; the silo runs them side by side.
		fmt.Fprintf(&b, ", each save waiting %v at the store, %d players' in %v", s.Latency, s.Players, s.ShutdownTook.Round(time.Millisecond))
	}
	b.WriteString("\n")
	if s.Watched != "" {
		fmt.Fprintf(&b, "a spectator following %s (an observer) saw %d events: a start and a result for each of its matches\n", s.Watched, s.Events)
	}
	return b.String()
}

// simulate lets bots join matches for a while, waits for the matches in
// play to end, and checks that the books balance.
func simulate(ctx context.Context, players int, d, match, latency time.Duration) (summary, error) {
	return simulateWith(ctx, silo.Config{}, nil, players, d, match, latency)
}

// simulateWith is simulate on a silo configured as cfg, with the lobby's
// kind options lobby: a test floods the lobby (a small backlog, turns
// handed off at once) with fewer bots than the race detector's goroutine
// limit.
func simulateWith(ctx context.Context, cfg silo.Config, lobby []silo.KindOption, players int, d, match, latency time.Duration) (summary, error) {
	records := newSlowRecords(latency)
	s, meter, err := newGameWith(cfg, lobby, match, slog.New(slog.DiscardHandler), records) // the summary has the counts
	if err != nil {
		return summary{}, err
	}
	defer s.Close()
	dead := s.SubscribeDeadLetters(1024)
	defer dead.Cancel()

	ids := make([]grain.ID, players)
	for i := range ids {
		ids[i] = grain.NewID(kindPlayer, fmt.Sprintf("bot-%03d", i))
	}
	// A spectator follows the first bot, as a client of GET
	// /players/{name}/events would: an observer the player tells.
	var events chan int
	if players > 0 {
		if events, err = spectate(ctx, s, ids[0]); err != nil {
			return summary{}, err
		}
	}
	playCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, players)
	for _, id := range ids {
		wg.Go(func() {
			t := time.NewTicker(match / 2) // a bot retries Join now and then
			defer t.Stop()
			for {
				// Asked with ctx, not playCtx: a Join already sent is
				// answered when play time ends, not given up on (an ask
				// whose caller gives up before its turn is a dead letter,
				// reason expired, and the books count every dead letter).
				// ErrBusy: queued or playing already. ErrOverloaded: the
				// lobby's backlog is full (a flood of bots): backpressure,
				// so the bot backs off and asks again, as a client would.
				_, err := s.Ask(ctx, id, Join{})
				if err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, grain.ErrOverloaded) {
					errs <- err
					return
				}
				select {
				case <-playCtx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return summary{}, err
	}

	// Let the matches in play finish: every player idle or still queued,
	// and every match the lobby started told to its players and over (the
	// lobby counts a match as it starts it, a moment before its players
	// hear of it: under a flood of bots, that moment is long).
	var sum summary
	watchedPlayed := 0
	for deadline := time.Now().Add(10 * time.Second); ; {
		played, err := silo.Call[int64](ctx, s, grain.NewID(kindLobby, "eu"), Played{})
		if errors.Is(err, grain.ErrOverloaded) && time.Now().Before(deadline) {
			time.Sleep(match) // the lobby still works through the last Joins
			continue
		}
		if err != nil {
			return summary{}, err
		}
		sum = summary{Players: players, Matches: int(played)}
		playing := 0
		for _, id := range ids {
			st, err := silo.Call[PlayerStats](ctx, s, id, GetStats{})
			if err != nil {
				return summary{}, err
			}
			sum.Wins += st.Wins
			sum.Losses += st.Losses
			if id == ids[0] {
				watchedPlayed = st.Wins + st.Losses
			}
			if st.State == "playing" {
				playing++
			}
		}
		if playing == 0 && sum.Wins == sum.Matches && sum.Losses == sum.Matches {
			break
		}
		if time.Now().After(deadline) {
			break // the books are checked below, and say what is missing
		}
		time.Sleep(match)
	}
	if sum.Top, err = silo.Call[[]Entry](ctx, s, grain.NewID(kindLeaderboard, "global"), Top{N: 5}); err != nil {
		return summary{}, err
	}
	if sum.Wins != sum.Matches || sum.Losses != sum.Matches {
		return sum, fmt.Errorf("books do not balance: %d matches, %d wins, %d losses", sum.Matches, sum.Wins, sum.Losses)
	}
	sum.Stats = s.Stats()
	sum.Turns = meter.Report()
	sum.Calls = meter.calls.Report()
	for _, n := range sum.Stats.DeadLetters {
		sum.DeadLetters += int(n)
	}
	sum.Latency = latency
	t0 := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		return sum, err
	}
	sum.ShutdownTook = time.Since(t0)
	// Every player saved its record as the silo shut down (OnDeactivate):
	// the records hold every match too.
	if _, sum.Saved, _ = records.totals(); sum.Saved != sum.Matches {
		return sum, fmt.Errorf("the players' saved records have %d wins, for %d matches", sum.Saved, sum.Matches)
	}
	if events != nil {
		// The silo closed the spectator's observer as it stopped, and the
		// spectator read what was left: every event the player told it, a
		// start and a result for each of its matches.
		sum.Watched, sum.Events = ids[0].Key(), <-events
		if sum.Events != 2*watchedPlayed {
			return sum, fmt.Errorf("the spectator saw %d events of %s, which played %d matches", sum.Events, sum.Watched, watchedPlayed)
		}
	}
	return sum, nil
}

// spectate subscribes an observer to a player's events and counts its
// matches' events; the count comes on the channel returned once the observer
// closes, as the silo stops (-1 unless the player said goodbye once, from
// OnDeactivate at the shutdown).
func spectate(ctx context.Context, s *silo.Silo, id grain.ID) (chan int, error) {
	obs, err := s.NewObserver(1024)
	if err != nil {
		return nil, err
	}
	if _, err := s.Ask(ctx, id, Watch{Observer: obs.ID()}); err != nil {
		obs.Close()
		return nil, err
	}
	count := make(chan int, 1)
	go func() {
		n, goodbyes := 0, 0
		for ev := range obs.C() {
			if ev.Msg.(Event).What == evDeactivated {
				goodbyes++ // once: the player stays active through the run, and deactivates at the shutdown
				continue
			}
			n++
		}
		if goodbyes != 1 {
			n = -1 // the books will not balance: simulate says so
		}
		count <- n
	}()
	return count, nil
}
