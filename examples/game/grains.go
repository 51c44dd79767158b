package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// The grain kinds of the game. Every grain owns its state and is reached by
// its identity; none holds a lock.
const (
	kindPlayer      = "player"      // key: the player's name
	kindLobby       = "lobby"       // key: the region; one lobby per region
	kindMatch       = "match"       // int key: the match number
	kindLeaderboard = "leaderboard" // key: "global"
	kindReferee     = "referee"     // key: the ruleset; a stateless worker
)

// Messages. They are plain values; a grain answers an ask by returning.
type (
	// Join asks a player to queue for a match.
	Join struct{}
	// GetStats asks a player for its record.
	GetStats struct{}
	// waiting tells the lobby a player wants a match.
	waiting struct{ Player grain.ID }
	// start tells a match who plays in it.
	start struct{ A, B grain.ID }
	// matchStarted tells a player its match began.
	matchStarted struct{ Match grain.ID }
	// matchOver is the match's own timer tick.
	matchOver struct{}
	// result tells a player how its match ended.
	result struct {
		Match grain.ID
		Won   bool
	}
	// score tells the leaderboard about a win.
	score struct{ Player string }
	// Top asks the leaderboard for its best N.
	Top struct{ N int }
	// Played asks the lobby how many matches it started.
	Played struct{}
	// judge asks a referee which of a match's players won: true for A.
	judge struct{ Match, A, B grain.ID }
	// Watch subscribes an observer (a client's connection) to a player's
	// events; Unwatch ends it.
	Watch   struct{ Observer grain.ID }
	Unwatch struct{ Observer grain.ID }
)

// Event is what a player's watchers are told.
type Event struct {
	Player string `json:"player"`
	What   string `json:"what"` // "match started", "won", "lost", or evDeactivated
	Match  string `json:"match"`
	Rating int    `json:"rating"`
}

// ErrBusy is what Join returns for a player already queued or playing.
var ErrBusy = errors.New("game: player is already queued or playing")

// PlayerStats is a player's record.
type PlayerStats struct {
	Name   string `json:"name"`
	Wins   int    `json:"wins"`
	Losses int    `json:"losses"`
	Rating int    `json:"rating"`
	State  string `json:"state"`
	// Watchers is how many clients follow the player's events now.
	Watchers int `json:"watchers"`
}

// Player is one player's grain. Its record (wins, losses, rating) outlives
// the activation, in Records; its state, its watchers and its place in a
// queue do not.
type Player struct {
	stats    PlayerStats
	lobby    grain.ID
	watchers grain.Observers // clients following this player (GET /players/{name}/events)
	records  Records
}

func newPlayer(records Records) func(id grain.ID) *Player {
	return func(id grain.ID) *Player {
		return &Player{
			stats:   PlayerStats{Name: id.Key(), Rating: 1000, State: "idle"},
			lobby:   grain.NewID(kindLobby, "eu"),
			records: records,
		}
	}
}

// OnActivate loads the player's record, if it has one. An error fails the
// activation, and the message that caused it gets the error; the next
// message tries again.
func (p *Player) OnActivate(ctx context.Context, _ *grain.Context) error {
	st, ok, err := p.records.Load(ctx, p.stats.Name)
	if err != nil {
		return fmt.Errorf("player %s: loading its record: %w", p.stats.Name, err)
	}
	if ok {
		p.stats.Wins, p.stats.Losses, p.stats.Rating = st.Wins, st.Losses, st.Rating
	}
	return nil
}

func (p *Player) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case Join:
		if p.stats.State != "idle" {
			return nil, ErrBusy
		}
		// A tell from a turn: the lobby sees this player as the sender.
		if err := c.Silo().Tell(ctx, p.lobby, waiting{Player: c.ID()}); err != nil {
			return nil, err
		}
		p.stats.State = "queued"
		return p.record(), nil
	case matchStarted:
		p.stats.State = "playing"
		p.notify(ctx, c, "match started", m.Match)
	case result:
		p.stats.State = "idle"
		if m.Won {
			p.stats.Wins++
			p.stats.Rating += 16
		} else {
			p.stats.Losses++
			p.stats.Rating -= 16
		}
		what := "lost"
		if m.Won {
			what = "won"
		}
		p.notify(ctx, c, what, m.Match)
	case GetStats:
		return p.record(), nil
	case Watch:
		_, err := p.watchers.Subscribe(m.Observer)
		return nil, err
	case Unwatch:
		p.watchers.Unsubscribe(m.Observer)
	default:
		return nil, fmt.Errorf("player: unexpected %T", msg)
	}
	return nil, nil
}

// record is the player's stats as a reply reports them.
func (p *Player) record() PlayerStats {
	st := p.stats
	st.Watchers = p.watchers.Len()
	return st
}

// evDeactivated is the player's goodbye to its watchers: its list of them
// is its state, gone with it, so a watcher that wants more subscribes
// again (which activates the player anew).
const evDeactivated = "deactivated"

// OnDeactivate saves the player's record and tells the watchers the player
// is going: idle for a while, or the silo shutting down (tells to
// observers still go out then) — but not when its supervision restarts or
// stops it after a failure: its state is in doubt, and the record saved
// last stays. The watchers are told all the same: the fresh instance that
// follows a restart does not know them, and they subscribe again.
func (p *Player) OnDeactivate(ctx context.Context, c *grain.Context) error {
	if c.DeactivationReason() == grain.DeactivationFailed {
		// Its supervision restarts or stops it after a failure: its state
		// is in doubt, and the record last saved is kept.
		p.notify(ctx, c, evDeactivated, grain.ID{})
		return nil
	}
	rec := p.stats
	rec.State, rec.Watchers = "", 0 // not part of the record
	err := p.records.Save(ctx, rec)
	p.notify(ctx, c, evDeactivated, grain.ID{})
	if err != nil {
		return fmt.Errorf("player %s: saving its record: %w", p.stats.Name, err) // the silo logs it
	}
	return nil
}

// notify tells the player's watchers what happened. A watcher that reads
// too slowly misses the event — a dead letter, reason overload, counted by
// the silo — and one that went away is dropped: neither is the player's
// failure, so neither fails its turn.
func (p *Player) notify(ctx context.Context, c *grain.Context, what string, match grain.ID) {
	if p.watchers.Len() == 0 {
		return
	}
	ev := Event{Player: p.stats.Name, What: what, Rating: p.stats.Rating}
	if !match.IsZero() {
		ev.Match = match.String()
	}
	_ = p.watchers.Notify(ctx, c.Silo(), ev)
}

// Lobby pairs waiting players into matches.
type Lobby struct {
	queue   []grain.ID
	matches int64
}

func (l *Lobby) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case waiting:
		l.queue = append(l.queue, m.Player)
		for len(l.queue) >= 2 {
			a, b := l.queue[0], l.queue[1]
			l.queue = l.queue[2:]
			l.matches++
			if err := c.Silo().Tell(ctx, grain.NewIntID(kindMatch, l.matches), start{A: a, B: b}); err != nil {
				return nil, err
			}
		}
	case Played:
		return l.matches, nil
	default:
		return nil, fmt.Errorf("lobby: unexpected %T", msg)
	}
	return nil, nil
}

// Match plays one game on a timer, reports the result, and deactivates.
type Match struct {
	a, b     grain.ID
	duration time.Duration
}

func (m *Match) Receive(ctx context.Context, c *grain.Context, msg any) (any, error) {
	switch s := msg.(type) {
	case start:
		m.a, m.b = s.A, s.B
		for _, p := range []grain.ID{m.a, m.b} {
			if err := c.Silo().Tell(ctx, p, matchStarted{Match: c.ID()}); err != nil {
				return nil, err
			}
		}
		// The game runs on a timer: its tick is a turn of this grain.
		return nil, c.StartTimer("over", m.duration, 0, matchOver{})
	case matchOver:
		// Every match asks the one referee identity: a stateless worker,
		// so the calls of matches on different partitions run at once.
		rt := c.Silo()
		aWon, err := silo.Call[bool](ctx, rt, grain.NewID(kindReferee, "ranked"), judge{Match: c.ID(), A: m.a, B: m.b})
		if err != nil {
			return nil, err
		}
		winner, loser := m.a, m.b
		if !aWon {
			winner, loser = loser, winner
		}
		err = errors.Join(
			rt.Tell(ctx, winner, result{Match: c.ID(), Won: true}),
			rt.Tell(ctx, loser, result{Match: c.ID(), Won: false}),
			rt.Tell(ctx, grain.NewID(kindLeaderboard, "global"), score{Player: winner.Key()}),
		)
		c.DeactivateOnIdle() // a finished match has nothing left to do
		return nil, err
	default:
		return nil, fmt.Errorf("match: unexpected %T", msg)
	}
}

// Referee judges matches. It keeps no state: one identity, several
// activations (WithStatelessWorker), any of which may judge any match.
type Referee struct{}

func (Referee) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	j, ok := msg.(judge)
	if !ok {
		return nil, fmt.Errorf("referee: unexpected %T", msg)
	}
	return !coin(j.Match), nil
}

// coin is the match's deterministic "skill": a hash of its identity.
func coin(id grain.ID) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id.String()))
	return h.Sum32()%2 == 0
}

// Entry is one line of the leaderboard.
type Entry struct {
	Player string `json:"player"`
	Wins   int    `json:"wins"`
}

// Leaderboard counts wins, and keeps the players ranked as scores come, so
// that a Top costs its N entries rather than a sort of every player: the
// leaderboard is one grain that every client reads, and a turn that sorted
// all players each time took a fifth of the served game's CPU under load
// (its profile, by kind: GET /debug/profile).
type Leaderboard struct {
	wins map[string]int
	rank []Entry // by wins, most first; then by name
}

func newLeaderboard(grain.ID) *Leaderboard { return &Leaderboard{wins: map[string]int{}} }

// byRank orders entries as the leaderboard shows them.
func byRank(a, b Entry) int {
	if a.Wins != b.Wins {
		return cmp.Compare(b.Wins, a.Wins)
	}
	return strings.Compare(a.Player, b.Player)
}

func (l *Leaderboard) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	switch m := msg.(type) {
	case score:
		w, had := l.wins[m.Player]
		if had { // move it: out of its place, into its new one
			i, _ := slices.BinarySearchFunc(l.rank, Entry{Player: m.Player, Wins: w}, byRank)
			l.rank = slices.Delete(l.rank, i, i+1)
		}
		l.wins[m.Player] = w + 1
		e := Entry{Player: m.Player, Wins: w + 1}
		i, _ := slices.BinarySearchFunc(l.rank, e, byRank)
		l.rank = slices.Insert(l.rank, i, e)
	case Top:
		if m.N < 0 {
			return nil, fmt.Errorf("leaderboard: Top{N: %d}: not negative", m.N)
		}
		// The reply is the caller's; an empty board is an empty list.
		return append([]Entry{}, l.rank[:min(m.N, len(l.rank))]...), nil
	default:
		return nil, fmt.Errorf("leaderboard: unexpected %T", msg)
	}
	return nil, nil
}

// register adds the game's kinds to a silo.
func register(s *silo.Silo, matchDuration time.Duration, records Records, lobby ...silo.KindOption) error {
	return errors.Join(
		silo.Register(s, kindPlayer, newPlayer(records), silo.WithIdleTimeout(10*time.Minute)),
		silo.Register(s, kindLobby, func(grain.ID) *Lobby { return &Lobby{} }, append([]silo.KindOption{silo.WithIdleTimeout(-1)}, lobby...)...),
		silo.Register(s, kindMatch, func(grain.ID) *Match { return &Match{duration: matchDuration} }),
		silo.Register(s, kindLeaderboard, newLeaderboard,
			silo.WithIdleTimeout(-1)),
		silo.Register(s, kindReferee, func(grain.ID) Referee { return Referee{} }, silo.WithStatelessWorker(0)),
	)
}
