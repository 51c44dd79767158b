package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/activation"
	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/silo/silotest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// With a store whose loads and saves each wait as a database's would, the
// books balance all the same and every record is saved at the shutdown,
// the saves side by side (the silo runs hooks that block off their
// partitions; the test logs how long the shutdown took: 16 ms here for 200
// players saving 2 ms each on one partition, where one save after another
// took 400 ms — silo's TestAShutdownSavesSideBySideWhenSavesBlock checks
// that on the bubble's clock).
func TestSimulationWithASlowStoreSavesEveryRecord(t *testing.T) {
	sum, err := simulateWith(t.Context(), silo.Config{Partitions: 1}, nil, 200, 300*time.Millisecond, 10*time.Millisecond, 2*time.Millisecond)
	require.NoError(t, err) // simulate checks the books and the records saved
	assert.Positive(t, sum.Matches)
	assert.Equal(t, sum.Matches, sum.Saved)
	assert.Contains(t, sum.String(), "each save waiting 2ms at the store, 200 players' in")
	t.Logf("the shutdown of %d players saving %v each: %v", sum.Players, sum.Latency, sum.ShutdownTook)
}

func TestSimulationBalancesItsBooks(t *testing.T) {
	sum, err := simulate(t.Context(), 20, 300*time.Millisecond, 10*time.Millisecond, 0)
	require.NoError(t, err)
	assert.Positive(t, sum.Matches)
	assert.Equal(t, sum.Matches, sum.Wins)
	assert.Equal(t, sum.Matches, sum.Losses)
	assert.NotEmpty(t, sum.Top)
	assert.Zero(t, sum.DeadLetters)
	assert.Equal(t, "bot-000", sum.Watched)
	assert.Positive(t, sum.Events, "the spectator saw bot-000's matches (simulate checks the count)")
	assert.Zero(t, sum.Events%2)
	var turns int64
	for _, k := range sum.Turns { // the meter, a filter, saw every kind's turns
		assert.Positive(t, k.Turns, k.Kind)
		turns += k.Turns
	}
	assert.Len(t, sum.Turns, 5)
	// The send filter saw what the grains sent each other: each match asked
	// the referee once, and told its two players its start and result.
	calls := map[string]KindCalls{}
	for _, c := range sum.Calls {
		calls[c.From+"->"+c.To] = c
	}
	referee := calls["match->referee"]
	assert.EqualValues(t, sum.Matches, referee.Asks, "a match asks the referee once")
	assert.Positive(t, referee.Longest)
	assert.EqualValues(t, 4*sum.Matches, calls["match->player"].Sends, "a start and a result to each of two players")
	assert.Zero(t, calls["match->player"].Asks)
	assert.Positive(t, calls["player->lobby"].Sends)
	assert.LessOrEqual(t, uint64(turns), sum.Stats.Handled, "message turns are among the turns the silo counts")
	// A match deactivates itself once played: the only deactivations
	// before the shutdown, and at most one a match.
	requested := sum.Stats.Deactivations[grain.DeactivationRequested]
	assert.Positive(t, requested)
	assert.LessOrEqual(t, requested, uint64(sum.Matches))
	assert.Len(t, sum.Stats.Deactivations, 1)
}

// A flood of bots fills the lobby's backlog, and the lobby pushes back: its
// turns run, so the bots' Joins past its backlog wait at its door until it
// has room (Stats().BacklogHolds, BacklogWaits); one of its turns held off
// past its grace (100 ms) would have them refused with ErrOverloaded
// instead — a dead letter, reason overload — and the bot asks again later.
// Either way no match is lost and the books balance. (They failed the
// simulation before, and a Played asked of the lobby while it still worked
// through the flood came back overloaded too; with a grace of two handoff
// thresholds, 20 µs here, every Join behind a 200 µs turn was refused.)
func TestAFloodOfBotsIsPushedBackNotLost(t *testing.T) {
	// A slow lobby — each turn 200 µs of work — whose backlog is one, on a
	// silo that hands a turn's partition off after 10 µs: the Joins behind
	// a turn pile up in its mailbox, as a flood of a hundred thousand bots
	// does at the defaults. The work lets other goroutines run meanwhile,
	// as a second core would: on one core (go test -cpu 1) a turn that
	// kept it let no bot send a Join while it ran, nor the monitor hand
	// it off, and the lobby was at times never sent more than it took.
	slow := grain.FilterFunc(func(ctx context.Context, c *grain.Context, msg any, next grain.Grain) (any, error) {
		for start := time.Now(); time.Since(start) < 200*time.Microsecond; {
			runtime.Gosched()
		}
		return next.Receive(ctx, c, msg)
	})
	cfg := silo.Config{HandoffThreshold: silo.MinHandoffThreshold}
	lobby := []silo.KindOption{silo.WithMaxBacklog(1, silo.RejectNewest), silo.WithFilters(slow)}
	sum, err := simulateWith(t.Context(), cfg, lobby, 400, 300*time.Millisecond, 10*time.Millisecond, 0)
	require.NoError(t, err)
	assert.Positive(t, sum.Matches)
	assert.Equal(t, sum.Matches, sum.Wins)
	assert.Equal(t, sum.Matches, sum.Losses)
	assert.Equal(t, sum.Matches, sum.Saved)
	assert.Positive(t, sum.Stats.BacklogHolds, "the lobby pushed back: its backlog held the bots at its door")
	assert.Positive(t, sum.Stats.BacklogWaits, "and bots waited there")
	overload := sum.Stats.DeadLetters[grain.ReasonOverload]
	assert.Equal(t, uint64(sum.DeadLetters), overload, "nothing but a refused Join became a dead letter")
	if overload > 0 {
		assert.Contains(t, sum.String(), "reason overload")
	}
}

func TestHTTP(t *testing.T) {
	s, meter, err := newGame(5*time.Millisecond, nil, newMemRecords())
	require.NoError(t, err)
	defer s.Close()
	srv := httptest.NewServer(handler(s, meter, nil))
	defer srv.Close()

	post := func(path string) int {
		resp, err := http.Post(srv.URL+path, "", nil)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	get := func(path string, v any) int {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
		}
		return resp.StatusCode
	}
	// The root lists the API; any other unknown path is not found.
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	index, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(index), "POST /players/{name}/join")
	require.Equal(t, http.StatusNotFound, get("/nothing", nil))

	// Before any match, the leaderboard is an empty list, not null; so
	// is what grains sent each other before they sent anything.
	for _, path := range []string{"/leaderboard", "/metrics/calls"} {
		resp, err = http.Get(srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "[]\n", string(body), path)
	}

	// A client follows alice's events before she joins: the response's
	// headers come once it is subscribed.
	stream, err := http.Get(srv.URL + "/players/alice/events?n=2")
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	assert.Equal(t, "application/x-ndjson", stream.Header.Get("Content-Type"))

	require.Equal(t, http.StatusOK, post("/players/alice/join"))
	require.Equal(t, http.StatusConflict, post("/players/alice/join"), "already queued")
	require.Equal(t, http.StatusOK, post("/players/bob/join"))
	// The match lasts 5 ms; wait for its result to reach both players.
	require.Eventually(t, func() bool {
		var a, b PlayerStats
		get("/players/alice", &a)
		get("/players/bob", &b)
		return a.Wins+a.Losses == 1 && b.Wins+b.Losses == 1
	}, 5*time.Second, 5*time.Millisecond)
	dec := json.NewDecoder(stream.Body)
	var started, ended Event
	require.NoError(t, dec.Decode(&started))
	require.NoError(t, dec.Decode(&ended))
	assert.Equal(t, Event{Player: "alice", What: "match started", Match: "match#1", Rating: 1000}, started)
	assert.Contains(t, []string{"won", "lost"}, ended.What)
	assert.Equal(t, "match#1", ended.Match)
	require.ErrorIs(t, dec.Decode(&ended), io.EOF, "n=2: the stream ends after two events")
	require.Equal(t, http.StatusBadRequest, get("/players/alice/events?n=-1", nil))
	require.Equal(t, http.StatusBadRequest, get("/players/alice/events?n=x", nil))
	for _, name := range []string{"%20", "a%2Fb", strings.Repeat("x", 33), "al%C3%AFce%00"} {
		require.Equal(t, http.StatusBadRequest, post("/players/"+name+"/join"), name)
		require.Equal(t, http.StatusBadRequest, get("/players/"+name, nil), name)
	}

	var top []Entry
	require.Equal(t, http.StatusOK, get("/leaderboard", &top))
	require.Len(t, top, 1)
	assert.Contains(t, []string{"alice", "bob"}, top[0].Player)
	var st PlayerStats
	require.Equal(t, http.StatusOK, get("/players/carol", &st), "a player exists as soon as it is named")
	assert.Equal(t, 1000, st.Rating)
	var online []string
	require.Equal(t, http.StatusOK, get("/players", &online))
	assert.Equal(t, []string{"alice", "bob", "carol"}, online)
	var turns []KindTurns
	require.Equal(t, http.StatusOK, get("/metrics", &turns))
	require.Len(t, turns, 5)
	assert.Equal(t, kindLeaderboard, turns[0].Kind)
	assert.Positive(t, turns[0].Turns)
	var calls []KindCalls
	require.Equal(t, http.StatusOK, get("/metrics/calls", &calls))
	require.NotEmpty(t, calls)
	assert.Contains(t, calls, KindCalls{From: kindLobby, To: kindMatch, Sends: 1}, "alice and bob's match, made by the lobby")
	watchers := func(name string) int {
		var st PlayerStats
		require.Equal(t, http.StatusOK, get("/players/"+name, &st))
		return st.Watchers
	}
	require.Eventually(t, func() bool { return watchers("alice") == 0 }, 5*time.Second, time.Millisecond,
		"a stream that ends unsubscribes")

	// A stream outlives its player's deactivation: told goodbye, it
	// subscribes again, and the player's next match reaches it.
	stream2, err := http.Get(srv.URL + "/players/alice/events?n=1")
	require.NoError(t, err)
	defer stream2.Body.Close()
	require.Equal(t, 1, watchers("alice"))
	// The test watches too, to see the goodbye: the activation is gone.
	goodbye, err := s.NewObserver(8)
	require.NoError(t, err)
	defer goodbye.Close()
	_, err = s.Ask(t.Context(), grain.NewID(kindPlayer, "alice"), Watch{Observer: goodbye.ID()})
	require.NoError(t, err)
	var before PlayerStats
	require.Equal(t, http.StatusOK, get("/players/alice", &before))
	require.NoError(t, s.Deactivate(t.Context(), grain.NewID(kindPlayer, "alice")))
	require.Equal(t, evDeactivated, (<-goodbye.C()).Msg.(Event).What)
	require.Eventually(t, func() bool { return watchers("alice") == 1 }, 5*time.Second, time.Millisecond,
		"the stream subscribed again")
	var after PlayerStats // a fresh activation, its record loaded
	require.Equal(t, http.StatusOK, get("/players/alice", &after))
	before.Watchers, after.Watchers = 0, 0
	assert.Equal(t, before, after, "the record outlived the activation (OnDeactivate saved it, OnActivate loaded it)")
	require.Equal(t, http.StatusOK, post("/players/alice/join"))
	require.Equal(t, http.StatusOK, post("/players/bob/join"))
	var again Event
	require.NoError(t, json.NewDecoder(stream2.Body).Decode(&again))
	assert.Equal(t, "match started", again.What)
	assert.Equal(t, "match#2", again.Match)
}

func TestCheckFlags(t *testing.T) {
	require.NoError(t, checkFlags(200, 2*time.Second, 20*time.Millisecond, nil))
	require.NoError(t, checkFlags(0, 0, time.Millisecond, nil))
	require.Error(t, checkFlags(-1, time.Second, time.Second, nil))
	require.Error(t, checkFlags(1, -time.Second, time.Second, nil))
	require.Error(t, checkFlags(1, time.Second, 0, nil))
	require.Error(t, checkFlags(1, time.Second, -time.Second, nil))
	require.ErrorContains(t, checkFlags(200, 2*time.Second, 20*time.Millisecond, []string{"500"}), `unexpected argument "500"`)
	require.NoError(t, checkLatency(0))
	require.NoError(t, checkLatency(time.Millisecond))
	require.ErrorContains(t, checkLatency(-time.Millisecond), "-store-latency")
}

// A player tells its watchers each match's start and result, and says
// goodbye when it deactivates — tested with silotest's probe, which wakes
// the test when the event comes.
func TestPlayerTellsItsWatchers(t *testing.T) {
	s := silotest.Start(t, silo.Config{}, func(s *silo.Silo) error { return register(s, time.Millisecond, newMemRecords()) })
	silotest.NoDeadLetters(t, s)
	probe := silotest.NewProbe(t, s)
	ctx := t.Context()
	alice, bob := grain.NewID(kindPlayer, "alice"), grain.NewID(kindPlayer, "bob")
	_, err := s.Ask(ctx, alice, Watch{Observer: probe.ID()})
	require.NoError(t, err)

	for _, p := range []grain.ID{alice, bob} {
		_, err := s.Ask(ctx, p, Join{})
		require.NoError(t, err)
	}
	n := probe.Expect(Event{Player: "alice", What: "match started", Match: "match#1", Rating: 1000})
	assert.Equal(t, alice, n.Sender)
	ended := silotest.ExpectType[Event](probe) // won or lost: the referee decides
	assert.Contains(t, []string{"won", "lost"}, ended.What)

	require.NoError(t, s.Deactivate(ctx, alice))
	probe.Expect(Event{Player: "alice", What: evDeactivated, Rating: ended.Rating})
}

// Interrupted while a client follows a player, the server shuts down
// gracefully at once: the stream ends with it, rather than hold the
// server's Shutdown until its deadline.
func TestServeShutsDownWithAStreamOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- serveOn(ctx, ln, 5*time.Millisecond, slog.New(slog.DiscardHandler), io.Discard) }()

	stream, err := http.Get("http://" + ln.Addr().String() + "/players/alice/events")
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	cancel()
	require.NoError(t, <-served, "a stream held the server's Shutdown to its deadline")
	_, err = io.ReadAll(stream.Body)
	require.NoError(t, err, "the stream ended cleanly")
}

// Interrupted, the server says what its shutdown did: the players active
// then deactivated, saving their records.
func TestServeReportsWhatItsShutdownSaved(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	var out bytes.Buffer
	served := make(chan error, 1)
	go func() { served <- serveOn(ctx, ln, 5*time.Millisecond, slog.New(slog.DiscardHandler), &out) }()

	for _, name := range []string{"alice", "bob"} {
		resp, err := http.Get("http://" + ln.Addr().String() + "/players/" + name)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	cancel()
	require.NoError(t, <-served)
	assert.Equal(t, "stopped: 2 grains deactivated by the shutdown; 2 players' records saved (wins: 0, losses: 0)\n", out.String())
}

// A CPU profile taken while players play splits the time by grain kind:
// the silo labels its turns (Config.ProfileLabels).
func TestCPUProfileIsLabeledByKind(t *testing.T) {
	s, meter, err := newGame(time.Millisecond, nil, newMemRecords())
	require.NoError(t, err)
	defer s.Close()
	srv := httptest.NewServer(handler(s, meter, nil))
	defer srv.Close()

	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 { // players asking for their stats until the profile is taken
		wg.Go(func() {
			id := grain.NewID(kindPlayer, fmt.Sprintf("p%d", i))
			for {
				select {
				case <-done:
					return
				default:
				}
				_, _ = s.Ask(t.Context(), id, GetStats{})
			}
		})
	}
	resp, err := http.Get(srv.URL + "/debug/profile?d=300ms")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(done)
	wg.Wait()
	require.NoError(t, err)
	if resp.StatusCode == http.StatusServiceUnavailable {
		t.Skipf("CPU profiling in use already (-cpuprofile?): %s", body)
	}
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	zr, err := gzip.NewReader(bytes.NewReader(body))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	// The profile's string table holds the label's key and values.
	assert.Contains(t, string(raw), silo.ProfileLabelKind)
	assert.Contains(t, string(raw), kindPlayer)

	resp, err = http.Get(srv.URL + "/debug/profile?d=2h")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"alice": true, "bot-007": true, "a.b_c": true, "Zoë": true, "玩家": true,
		strings.Repeat("é", 32): true, strings.Repeat("x", 33): false,
		"": false, " ": false, "a b": false, "a/b": false, "al\x00ice": false, "<script>": false,
	} {
		assert.Equal(t, want, validName(name), "%q", name)
	}
}

// flakyRecords fails the loads and saves it is told to, as a database that
// is down for a while.
type flakyRecords struct {
	*memRecords
	loadErr, saveErr chan error // an error waiting here fails the next call
}

var errStoreDown = errors.New("store down")

func (r flakyRecords) Load(ctx context.Context, name string) (PlayerStats, bool, error) {
	select {
	case err := <-r.loadErr:
		return PlayerStats{}, false, err
	default:
		return r.memRecords.Load(ctx, name)
	}
}

func (r flakyRecords) Save(ctx context.Context, st PlayerStats) error {
	select {
	case err := <-r.saveErr:
		return err
	default:
		return r.memRecords.Save(ctx, st)
	}
}

// A player's record outlives its activation: saved by OnDeactivate, loaded
// by OnActivate. A load that fails fails the activation — the message that
// caused it gets the error — and a later message activates the player
// with its record; a save that fails is logged, and the record keeps what
// was saved before.
func TestAPlayersRecordOutlivesItsActivation(t *testing.T) {
	records := flakyRecords{memRecords: newMemRecords(), loadErr: make(chan error, 1), saveErr: make(chan error, 1)}
	s := silotest.Start(t, silo.Config{}, func(s *silo.Silo) error { return register(s, time.Millisecond, records) })
	ctx := t.Context()
	alice, bob := grain.NewID(kindPlayer, "alice"), grain.NewID(kindPlayer, "bob")
	stats := func(id grain.ID) PlayerStats {
		st, err := silo.Call[PlayerStats](ctx, s, id, GetStats{})
		require.NoError(t, err)
		return st
	}
	play := func() {
		for _, p := range []grain.ID{alice, bob} {
			_, err := s.Ask(ctx, p, Join{})
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return stats(alice).State == "idle" && stats(bob).State == "idle" },
			5*time.Second, time.Millisecond)
	}
	play()
	won := stats(alice)
	require.Equal(t, 1, won.Wins+won.Losses)
	require.NoError(t, s.Deactivate(ctx, alice))
	require.Eventually(t, func() bool { _, ok, _ := records.memRecords.Load(ctx, "alice"); return ok },
		5*time.Second, time.Millisecond, "saved as it deactivated")
	assert.Equal(t, won, stats(alice), "loaded as it activated again")

	// The store is down as alice activates again: the message that
	// activates her gets the error; the next, once it is back, her record.
	require.NoError(t, s.Deactivate(ctx, alice))
	require.Eventually(t, func() bool { return s.Stats().Activations[kindPlayer] == 1 }, 5*time.Second, time.Millisecond)
	records.loadErr <- errStoreDown
	_, err := s.Ask(ctx, alice, GetStats{})
	require.ErrorIs(t, err, errStoreDown)
	require.Eventually(t, func() bool {
		st, err := silo.Call[PlayerStats](ctx, s, alice, GetStats{})
		return err == nil && st == won
	}, 5*time.Second, time.Millisecond, "activated with her record once the store is back")

	// A save that fails loses what alice won since her last save.
	play()
	records.saveErr <- errStoreDown
	require.NoError(t, s.Deactivate(ctx, alice))
	require.Eventually(t, func() bool { return len(records.saveErr) == 0 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return s.Stats().Activations[kindPlayer] == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, won, stats(alice), "the record as it was last saved")
}

// The leaderboard's ranking, kept as scores come, is the one a sort of
// every player's wins gives; a negative Top is an error, not a panic.
func TestLeaderboardRanksAsASortWould(t *testing.T) {
	l := newLeaderboard(grain.NewID(kindLeaderboard, "global"))
	rng := rand.New(rand.NewPCG(1, 2))
	wins := map[string]int{}
	top := func(n int) []Entry {
		v, err := l.Receive(t.Context(), nil, Top{N: n})
		require.NoError(t, err)
		return v.([]Entry)
	}
	for i := range 5000 {
		p := fmt.Sprintf("p%02d", rng.IntN(60))
		wins[p]++
		_, err := l.Receive(t.Context(), nil, score{Player: p})
		require.NoError(t, err)
		if i%500 != 0 {
			continue
		}
		want := make([]Entry, 0, len(wins))
		for p, w := range wins {
			want = append(want, Entry{Player: p, Wins: w})
		}
		slices.SortFunc(want, func(a, b Entry) int {
			if a.Wins != b.Wins {
				return b.Wins - a.Wins
			}
			return strings.Compare(a.Player, b.Player)
		})
		require.Equal(t, want, top(len(want)+5))
		require.Equal(t, want[:min(3, len(want))], top(3))
	}
	got := top(2)
	got[0].Wins = -1 // the reply is the caller's to change
	assert.NotEqual(t, -1, top(1)[0].Wins)
	_, err := l.Receive(t.Context(), nil, Top{N: -1})
	require.Error(t, err)
	assert.Empty(t, top(0))
}

// A player its supervision stops after a failure does not save its record
// as it goes (its state is in doubt, gc.DeactivationReason() says so): the
// record last saved stays. Here the silo's supervision stops a grain on
// any error, and a second Join while queued is one (ErrBusy).
func TestAPlayerStoppedAfterAFailureKeepsItsLastRecord(t *testing.T) {
	records := newMemRecords()
	stopOnError := activation.Supervision{Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive { return activation.Stop })}
	s := silotest.Start(t, silo.Config{Supervision: stopOnError}, func(s *silo.Silo) error { return register(s, time.Hour, records) })
	ctx := t.Context()
	alice := grain.NewID(kindPlayer, "alice")
	_, err := s.Ask(ctx, alice, Join{}) // queued: no one to play yet
	require.NoError(t, err)
	_, err = s.Ask(ctx, alice, Join{})
	require.ErrorIs(t, err, ErrBusy)
	require.Eventually(t, func() bool { return s.Stats().Deactivations[grain.DeactivationFailed] == 1 }, 5*time.Second, time.Millisecond)
	_, saved, err := records.Load(ctx, "alice")
	require.NoError(t, err)
	assert.False(t, saved, "a player stopped for a failure saved nothing")

	bob := grain.NewID(kindPlayer, "bob")
	_, err = s.Ask(ctx, bob, GetStats{})
	require.NoError(t, err)
	require.NoError(t, s.Deactivate(ctx, bob))
	require.Eventually(t, func() bool { _, ok, _ := records.Load(ctx, "bob"); return ok }, 5*time.Second, time.Millisecond,
		"one deactivated as requested saves")
}

// A player its supervision restarts after a failure says goodbye to its
// watchers as the failed instance goes (the fresh one does not know them)
// and saves nothing; the fresh instance starts from the record last saved,
// not from the failed one's state. Here the silo's supervision restarts a
// grain on any error, and a second Join while queued is one (ErrBusy).
func TestAPlayerRestartedAfterAFailureTellsItsWatchers(t *testing.T) {
	records := newMemRecords()
	restartOnError := activation.Supervision{Decider: activation.DeciderFunc(func(grain.ID, error) activation.Directive { return activation.Restart })}
	s := silotest.Start(t, silo.Config{Supervision: restartOnError}, func(s *silo.Silo) error { return register(s, time.Hour, records) })
	probe := silotest.NewProbe(t, s)
	ctx := t.Context()
	alice := grain.NewID(kindPlayer, "alice")
	_, err := s.Ask(ctx, alice, Watch{Observer: probe.ID()})
	require.NoError(t, err)
	_, err = s.Ask(ctx, alice, Join{}) // queued: no one to play yet
	require.NoError(t, err)
	_, err = s.Ask(ctx, alice, Join{})
	require.ErrorIs(t, err, ErrBusy)
	probe.Expect(Event{Player: "alice", What: evDeactivated, Rating: 1000})
	st, err := silo.Call[PlayerStats](ctx, s, alice, GetStats{})
	require.NoError(t, err)
	assert.Equal(t, "idle", st.State, "the fresh instance is not queued: that state went with the failed one")
	assert.Zero(t, st.Watchers)
	_, saved, err := records.Load(ctx, "alice")
	require.NoError(t, err)
	assert.False(t, saved, "a player restarted for a failure saved nothing")
	assert.Equal(t, uint64(1), s.Stats().Restarts)
}
