package silo

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/grain"
	"github.com/granary-go/granary/internal/ctxerr"
)

// ctxErr reports why ctx ended, as ctxerr.Of does — and, for the ctx of a
// turn (or one derived from it) whose silo has closed, as ErrSiloClosed
// too. Close (or a Shutdown whose ctx ended) ends every turn's ctx, and
// the context package gives a ctx of ours no cause (context.Cause finds
// only its own kinds): a turn's call then failed with context.Canceled
// alone, where a caller outside the silo is told ErrSiloClosed, and the
// grain could not tell its silo going away from a caller giving up
// (TestATurnsSendsFailWithErrSiloClosedOnceItsSiloCloses). The turn's
// silo, which may not be s: a turn of one silo calling another's grain.
// The error still matches ctx's.
func (s *Silo) ctxErr(ctx context.Context) error {
	err := ctxerr.Of(ctx)
	if err == nil {
		return nil
	}
	// A turn's silo has started: its partitions' bases are set.
	if ti := turnFrom(ctx); ti != nil && ti.w.p.base.Err() != nil {
		return fmt.Errorf("%w: %w", grain.ErrSiloClosed, err)
	}
	return err
}
