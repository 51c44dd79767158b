package ctxerr_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/internal/ctxerr"
)

func TestOfMatchesTheErrorAndTheCause(t *testing.T) {
	assert.NoError(t, ctxerr.Of(t.Context()))

	plain, cancel := context.WithCancel(t.Context())
	cancel()
	assert.Same(t, context.Canceled, ctxerr.Of(plain), "no cause: ctx's error itself")

	left := errors.New("client left")
	caused, cancelCause := context.WithCancelCause(t.Context())
	cancelCause(left)
	err := ctxerr.Of(caused)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, left)
	assert.EqualError(t, err, "context canceled: client left")
}
