package grain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

// shuttingSelf is a test double that says its grain deactivates because
// the silo shuts down.
type shuttingSelf struct{ fakeSelf }

func (shuttingSelf) DeactivationReason() grain.DeactivationReason {
	return grain.DeactivationShutdown
}

// A Context reports the reason its Self gives; none without one, or from a
// Self that does not say.
func TestDeactivationReasonComesFromSelf(t *testing.T) {
	id := grain.NewID("cart", "1")
	var nilCtx *grain.Context
	require.Equal(t, grain.DeactivationNone, nilCtx.DeactivationReason())
	c := grain.NewContext(id, grain.ID{}, nil, nil)
	require.Equal(t, grain.DeactivationNone, c.DeactivationReason())
	c = grain.NewContext(id, grain.ID{}, nil, &fakeSelf{})
	require.Equal(t, grain.DeactivationNone, c.DeactivationReason())
	c = grain.NewContext(id, grain.ID{}, nil, &shuttingSelf{})
	require.Equal(t, grain.DeactivationShutdown, c.DeactivationReason())
}

func TestDeactivationReasonNames(t *testing.T) {
	for r, want := range map[grain.DeactivationReason]string{
		grain.DeactivationNone: "none", grain.DeactivationIdle: "idle", grain.DeactivationRequested: "requested",
		grain.DeactivationEvicted: "evicted", grain.DeactivationMemoryPressure: "memory pressure",
		grain.DeactivationStopped: "stopped", grain.DeactivationShutdown: "shutdown", 200: "DeactivationReason(200)",
	} {
		require.Equal(t, want, r.String())
	}
}
