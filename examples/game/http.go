package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// handler is the game's HTTP API over a silo: a thin layer, since each
// player is already a grain reached by its name. GET /players lists the
// players active now; GET /players/{name}/events streams the player's
// events as they happen; GET /metrics reports the meter's counts of turns by
// kind, GET /metrics/calls what the grains sent each other; GET
// /debug/profile?d=10s, a CPU profile labeled by kind.
//
// Event streams end when stop is closed (nil: never), so that a server
// shutting down does not wait for clients that would listen for ever.
func handler(s *silo.Silo, meter *turnMeter, stop <-chan struct{}) http.Handler {
	mux := http.NewServeMux()
	call := func(w http.ResponseWriter, r *http.Request, id grain.ID, msg any) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		v, err := s.Ask(ctx, id, msg)
		switch {
		case errors.Is(err, ErrBusy):
			http.Error(w, err.Error(), http.StatusConflict)
		case errors.Is(err, grain.ErrSiloClosed), errors.Is(err, grain.ErrOverloaded):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case errors.Is(err, grain.ErrTimeout):
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	player := func(r *http.Request) (grain.ID, bool) {
		name := r.PathValue("name")
		return grain.NewID(kindPlayer, name), validName(name)
	}
	mux.HandleFunc("GET /players/{name}", func(w http.ResponseWriter, r *http.Request) {
		if id, ok := player(r); ok {
			call(w, r, id, GetStats{})
			return
		}
		http.Error(w, badName, http.StatusBadRequest)
	})
	mux.HandleFunc("POST /players/{name}/join", func(w http.ResponseWriter, r *http.Request) {
		if id, ok := player(r); ok {
			call(w, r, id, Join{})
			return
		}
		http.Error(w, badName, http.StatusBadRequest)
	})
	mux.HandleFunc("GET /players/{name}/events", func(w http.ResponseWriter, r *http.Request) {
		id, ok := player(r)
		if !ok {
			http.Error(w, badName, http.StatusBadRequest)
			return
		}
		limit, err := strconv.Atoi(cmp.Or(r.URL.Query().Get("n"), "0"))
		if err != nil || limit < 0 {
			http.Error(w, "n: a count of events, 0 for no end", http.StatusBadRequest)
			return
		}
		events(w, r, s, id, limit, stop)
	})
	mux.HandleFunc("GET /players", func(w http.ResponseWriter, r *http.Request) {
		// Who is on line: the player grains active now (an operator's
		// view; a player is reached by name, never looked up in a list).
		ids, err := s.ActiveGrains(r.Context(), kindPlayer)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = id.Key()
		}
		slices.Sort(names)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(names)
	})
	mux.HandleFunc("GET /leaderboard", func(w http.ResponseWriter, r *http.Request) {
		call(w, r, grain.NewID(kindLeaderboard, "global"), Top{N: 10})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(meter.Report())
	})
	mux.HandleFunc("GET /metrics/calls", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(meter.calls.Report())
	})
	mux.HandleFunc("GET /debug/profile", cpuProfile)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, apiIndex)
	})
	return mux
}

// apiIndex is what GET / answers: the API, for whoever opens the server's
// address first.
const apiIndex = `Granary example game: each player is a grain, reached by its name.

POST /players/{name}/join     queue for a match (409 while queued or playing)
GET  /players/{name}          the player's wins, losses, rating and state
GET  /players/{name}/events   the player's events as they happen (ndjson; ?n=N ends after N)
GET  /players                 the players active now
GET  /leaderboard             the top ten by wins
GET  /metrics                 turns by grain kind
GET  /metrics/calls           what grains sent each other, by kind
GET  /debug/profile?d=10s     a CPU profile, labeled by grain kind (go tool pprof -tags)
`

// badName is the answer to a request naming a player validName refuses.
const badName = "bad player name: 1 to 32 letters, digits, '-', '_' or '.'"

// validName reports whether name can be a player's: any string is a valid
// grain key, but a player's name is shown on a leaderboard and typed in a
// URL, so a blank one or one of five thousand characters is refused here,
// at the edge, before it reaches a grain.
func validName(name string) bool {
	if name == "" || utf8.RuneCountInString(name) > 32 {
		return false
	}
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_.", r) {
			return false
		}
	}
	return true
}

// cpuProfile serves a CPU profile of the next ?d= (default 10s, at most a
// minute). The silo labels its turns with their kind
// (Config.ProfileLabels), so `go tool pprof -tags` splits the time by kind.
func cpuProfile(w http.ResponseWriter, r *http.Request) {
	d := 10 * time.Second
	if q := r.URL.Query().Get("d"); q != "" {
		var err error
		if d, err = time.ParseDuration(q); err != nil || d <= 0 || d > time.Minute {
			http.Error(w, "d: a duration up to 1m", http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := pprof.StartCPUProfile(w); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable) // one profile at a time
		return
	}
	defer pprof.StopCPUProfile()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// events streams a player's events to the client as JSON lines, until the
// client goes away, the silo stops, stop is closed, or limit events (0: no
// limit) are sent.
// The client is an observer: the player grain tells it, and never waits
// for it.
func events(w http.ResponseWriter, r *http.Request, s *silo.Silo, id grain.ID, limit int, stop <-chan struct{}) {
	obs, err := s.NewObserver(64)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer obs.Close()
	watch := func() error {
		_, err := s.Ask(r.Context(), id, Watch{Observer: obs.ID()})
		return err
	}
	if err := watch(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer func() {
		// Unsubscribe at once rather than at the player's next event; with
		// a ctx of its own, as the request's is likely over.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Second)
		defer cancel()
		_ = s.Tell(ctx, id, Unwatch{Observer: obs.ID()})
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // the client knows it is subscribed
	}
	enc := json.NewEncoder(w)
	for sent := 0; limit == 0 || sent < limit; sent++ {
		select {
		case <-r.Context().Done():
			return
		case <-stop:
			return
		case n, ok := <-obs.C():
			if !ok {
				return // the silo stopped
			}
			if ev, _ := n.Msg.(Event); ev.What == evDeactivated {
				// The player went idle and forgot its watchers: subscribe
				// again, which brings it back. At shutdown this fails, and
				// the stream ends.
				if watch() != nil {
					return
				}
				sent--
				continue
			}
			if enc.Encode(n.Msg) != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// serve runs the HTTP API on addr until ctx ends, then shuts the server
// and the silo down gracefully.
func serve(ctx context.Context, addr string, match time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "serving the game on http://%s (GET / lists the API); interrupt or SIGTERM to stop\n", ln.Addr())
	return serveOn(ctx, ln, match, slog.New(slog.NewTextHandler(os.Stderr, nil)), os.Stderr)
}

// serveOn is serve on a listener it closes, the silo logging to logger.
// Stopped gracefully, it writes to out what the shutdown did: the grains
// it deactivated and the records the players saved as they went.
func serveOn(ctx context.Context, ln net.Listener, match time.Duration, logger *slog.Logger, out io.Writer) error {
	records := newMemRecords()
	s, meter, err := newGame(match, logger, records)
	if err != nil {
		ln.Close()
		return err
	}
	defer s.Close()
	// The streams end as the server shuts down: it waits for handlers to
	// return, and a stream would otherwise keep it waiting until its
	// deadline.
	stopStreams := make(chan struct{})
	srv := &http.Server{Handler: handler(s, meter, stopStreams), ReadHeaderTimeout: 5 * time.Second}
	srv.RegisterOnShutdown(func() { close(stopStreams) })
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := errors.Join(srv.Shutdown(sctx), s.Shutdown(sctx)); err != nil {
		return err
	}
	players, wins, losses := records.totals()
	fmt.Fprintf(out, "stopped: %d grains deactivated by the shutdown; %d players' records saved (wins: %d, losses: %d)\n",
		s.Stats().Deactivations[grain.DeactivationShutdown], players, wins, losses)
	return nil
}
