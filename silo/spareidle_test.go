package silo_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// spare is a stateless worker for tests in a synctest bubble: a hold
// message keeps its turn until released, and each deactivation is reported
// with the bubble's time and why.
type spare struct {
	entered chan<- struct{}
	gone    chan<- spareGone
}

type (
	holdTurn  struct{ until <-chan struct{} }
	spareGone struct {
		at     time.Time
		reason grain.DeactivationReason
	}
)

func (g *spare) Receive(_ context.Context, _ *grain.Context, msg any) (any, error) {
	if h, ok := msg.(holdTurn); ok {
		g.entered <- struct{}{}
		<-h.until
	}
	return "ok", nil
}

func (g *spare) OnDeactivate(_ context.Context, c *grain.Context) error {
	g.gone <- spareGone{time.Now(), c.DeactivationReason()}
	return nil
}

// spareSilo starts, in the current bubble, a silo of two partitions with
// a stateless kind of two activations an identity, and makes both
// activations of one identity: the first held in a turn, a message then
// goes to the second. It returns the identity, the deactivations, and the
// bubble's time once both activations were idle.
func spareSilo(t *testing.T, cfg silo.Config, opts ...silo.KindOption) (*silo.Silo, grain.ID, chan spareGone, time.Time) {
	cfg.Partitions = 2
	s, err := silo.New(cfg)
	require.NoError(t, err)
	entered, gone := make(chan struct{}, 4), make(chan spareGone, 4)
	opts = append([]silo.KindOption{silo.WithStatelessWorker(2)}, opts...)
	require.NoError(t, silo.Register(s, "spare", func(grain.ID) *spare { return &spare{entered, gone} }, opts...))
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })

	id := grain.NewID("spare", "pricer")
	release := make(chan struct{})
	require.NoError(t, s.Tell(t.Context(), id, holdTurn{release})) // the first, both being idle
	<-entered
	_, err = s.Ask(t.Context(), id, "quick") // the first busy: a second activation answers
	require.NoError(t, err)
	close(release)
	synctest.Wait()
	require.Equal(t, 2, s.Stats().Activations["spare"])
	return s, id, gone, time.Now()
}

// A burst's spare activation of a stateless identity goes once it has been
// idle DefaultSpareIdleTimeout (2 s), within a tick of the idle wheel (an
// eighth of it, by default); the first keeps the kind's idle timeout — as
// Orleans 9.2 removes idle stateless workers.
func TestStatelessWorkerSpareGoesSoonAfterABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, id, gone, idleFrom := spareSilo(t, silo.Config{IdleTimeout: time.Minute})

		time.Sleep(silo.DefaultSpareIdleTimeout - time.Millisecond)
		synctest.Wait()
		assert.Empty(t, drained(gone), "a spare idle less than 2 s stays")

		time.Sleep(silo.DefaultSpareIdleTimeout / 8)
		synctest.Wait()
		g := drained(gone)
		require.Len(t, g, 1, "the spare goes; the first stays")
		assert.Equal(t, grain.DeactivationIdle, g[0].reason)
		assert.GreaterOrEqual(t, g[0].at.Sub(idleFrom), silo.DefaultSpareIdleTimeout)
		assert.Equal(t, 1, s.Stats().Activations["spare"])

		// The one left is the first: a message goes to it (a tie goes to
		// the first), and no activation is made for it.
		_, err := s.Ask(t.Context(), id, "quick")
		require.NoError(t, err)
		assert.Equal(t, 1, s.Stats().Activations["spare"])
		asked := time.Now()

		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		assert.Empty(t, drained(gone), "the first keeps the kind's idle timeout")
		time.Sleep(time.Minute / 8)
		synctest.Wait()
		g = drained(gone)
		require.Len(t, g, 1)
		assert.GreaterOrEqual(t, g[0].at.Sub(asked), time.Minute)
		assert.EqualValues(t, 2, s.Stats().Deactivations[grain.DeactivationIdle])
	})
}

// WithSpareIdleTimeout sets the spares' idle timeout; a negative one
// keeps them as long as the first.
func TestWithSpareIdleTimeoutSetsTheSparesIdleTimeout(t *testing.T) {
	t.Run("shorter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, gone, idleFrom := spareSilo(t, silo.Config{IdleTimeout: time.Minute}, silo.WithSpareIdleTimeout(200*time.Millisecond))
			time.Sleep(time.Second)
			synctest.Wait()
			g := drained(gone)
			require.Len(t, g, 1)
			assert.Less(t, g[0].at.Sub(idleFrom), 300*time.Millisecond, "within a tick (25 ms: an eighth of it) of 200 ms")
		})
	})
	t.Run("as long as the first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, gone, idleFrom := spareSilo(t, silo.Config{IdleTimeout: time.Minute}, silo.WithSpareIdleTimeout(-1))
			time.Sleep(time.Minute - time.Millisecond)
			synctest.Wait()
			assert.Empty(t, drained(gone))
			time.Sleep(time.Second)
			synctest.Wait()
			g := drained(gone)
			require.Len(t, g, 2, "both at the kind's idle timeout")
			for _, d := range g {
				assert.GreaterOrEqual(t, d.at.Sub(idleFrom), time.Minute)
			}
		})
	})
	t.Run("longer than the kind's", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, gone, _ := spareSilo(t, silo.Config{IdleTimeout: time.Minute}, silo.WithSpareIdleTimeout(time.Hour))
			time.Sleep(time.Minute + time.Second)
			synctest.Wait()
			assert.Len(t, drained(gone), 2, "the kind's shorter idle timeout holds for the spares too")
		})
	})
}

// A kind whose grains never idle out keeps its first activation; its
// spares still go.
func TestStatelessWorkerSpareGoesThoughTheKindNeverIdles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, gone, _ := spareSilo(t, silo.Config{IdleTimeout: -1})
		time.Sleep(silo.DefaultSpareIdleTimeout + time.Second)
		synctest.Wait()
		require.Len(t, drained(gone), 1)
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		assert.Empty(t, drained(gone), "the first stays for good")
		assert.Equal(t, 1, s.Stats().Activations["spare"])
	})
}

// A spare that keeps getting messages stays, however long: only an idle
// one goes.
func TestStatelessWorkerSpareInUseStays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := silo.New(silo.Config{Partitions: 2, IdleTimeout: time.Minute})
		require.NoError(t, err)
		entered, gone := make(chan struct{}, 4), make(chan spareGone, 4)
		require.NoError(t, silo.Register(s, "spare", func(grain.ID) *spare { return &spare{entered, gone} }, silo.WithStatelessWorker(2)))
		require.NoError(t, s.Start())
		t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
		id := grain.NewID("spare", "pricer")
		release := make(chan struct{})
		require.NoError(t, s.Tell(t.Context(), id, holdTurn{release})) // the first, held for the whole test
		<-entered
		for range 30 { // a message a second: each goes to the spare, the first busy
			_, err := s.Ask(t.Context(), id, "quick")
			require.NoError(t, err)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		assert.Empty(t, drained(gone))
		assert.Equal(t, 2, s.Stats().Activations["spare"])
		close(release)
	})
}

func TestWithSpareIdleTimeoutRefusesZeroAndAPlainKind(t *testing.T) {
	s, err := silo.New(silo.Config{})
	require.NoError(t, err)
	defer s.Close()
	newG := func(grain.ID) *counter { return &counter{} }
	err = silo.Register(s, "zero", newG, silo.WithStatelessWorker(0), silo.WithSpareIdleTimeout(0))
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "WithSpareIdleTimeout(0)")
	err = silo.Register(s, "plain", newG, silo.WithSpareIdleTimeout(time.Second))
	require.ErrorIs(t, err, grain.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "without WithStatelessWorker")
	require.NoError(t, silo.Register(s, "one", newG, silo.WithSpareIdleTimeout(time.Second), silo.WithStatelessWorker(1)),
		"options in any order; a stateless kind of one activation has no spare, and that is no error")
}
