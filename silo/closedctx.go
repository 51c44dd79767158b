package silo

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/ctxerr"
)

// ctxErr reports why ctx ended, as ctxerr.Of does — and, for the ctx of a
// turn of s (or one derived from it) once s has closed, as ErrSiloClosed
// too. Close (or a Shutdown whose ctx ended) ends every turn's ctx, and
// the context package gives a ctx of ours no cause (context.Cause finds
// only its own kinds): a turn's call then failed with context.Canceled
// alone, where a caller outside the silo is told ErrSiloClosed, and the
// grain could not tell a silo going away from a caller giving up
// (TestATurnsSendsFailWithErrSiloClosedOnceItsSiloCloses). The error still
// matches ctx's.
func (s *Silo) ctxErr(ctx context.Context) error {
	err := ctxerr.Of(ctx)
	if err == nil {
		return nil
	}
	// A turn of s's: s started, and its partitions' bases are set.
	if ti := turnFrom(ctx); ti != nil && ti.w.p.s == s && ti.w.p.base.Err() != nil {
		return fmt.Errorf("%w: %w", grain.ErrSiloClosed, err)
	}
	return err
}
