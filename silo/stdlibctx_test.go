package silo_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/silo"
)

// fetcher calls an HTTP service with its turn's ctx — in OnActivate, as a
// grain loading its state does, and in its handler, directly and under a
// timeout derived from it: net/http's transport watches a request's ctx
// from goroutines of its own, which may look at it after the turn.
type fetcher struct {
	client *http.Client
	url    string
	done   chan<- struct{}
}

func (f *fetcher) fetch(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		panic(err)
	}
	if resp, err := f.client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

func (f *fetcher) OnActivate(ctx context.Context, _ *grain.Context) error {
	f.fetch(ctx)
	return nil
}

func (f *fetcher) Receive(ctx context.Context, _ *grain.Context, _ any) (any, error) {
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	f.fetch(bounded)
	cancel()
	// The transport's read loop ends the request's own ctx, derived from
	// the turn's, once it has read the response: maybe after the turn.
	f.fetch(ctx)
	f.done <- struct{}{}
	return nil, nil
}

// Grains that pass their ctx to net/http — tells and asks, grains
// activated again and again — run clean under -race: the turn ctxs the
// transport's goroutines read late are never rewritten under them
// (turnCtx.reset, partition.hookCtx, turnCtx.Value). Before, this reported
// data races in every run.
func TestGrainsPassingTheirCtxToNetHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	const turns = 2000
	done := make(chan struct{}, turns)
	s := newSilo(t, silo.Config{Partitions: 2}, func(s *silo.Silo) {
		require.NoError(t, silo.Register(s, "fetcher", func(grain.ID) *fetcher {
			return &fetcher{client: client, url: srv.URL, done: done}
		}, silo.WithIdleTimeout(2*time.Millisecond)))
	})
	ctx := ctxT(t)
	const senders = 4
	var wg sync.WaitGroup
	for c := range senders {
		wg.Go(func() {
			for i := c; i < turns; i += senders {
				id := grain.NewIntID("fetcher", int64(i%50))
				if i%2 == 0 {
					assert.NoError(t, s.Tell(ctx, id, i))
				} else {
					_, err := s.Ask(ctx, id, i)
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	for range turns {
		<-done
	}
	require.NoError(t, s.Shutdown(ctx))
}
