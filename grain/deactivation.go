package grain

import "strconv"

// DeactivationReason says why a grain is being deactivated, as Orleans'
// DeactivationReason does: what Context.DeactivationReason reports during
// OnDeactivate, where a grain may save differently when it is shed under
// memory pressure than when the silo shuts down, or count why its kind's
// grains go. It is a value: safe for concurrent use.
type DeactivationReason uint8

// The reasons a grain can be deactivated.
const (
	DeactivationNone           DeactivationReason = iota // not deactivating: a turn other than OnDeactivate
	DeactivationIdle                                     // idle for its kind's idle timeout
	DeactivationRequested                                // the grain's DeactivateOnIdle, or silo.Deactivate
	DeactivationEvicted                                  // the activation cap (Config.MaxActivations) made room
	DeactivationMemoryPressure                           // shed while memory ran short (Config.MemoryLimit)
	DeactivationStopped                                  // silo.Stop
	DeactivationShutdown                                 // the silo is shutting down
	// DeactivationFailed: its kind's supervision restarts it after a
	// failure (a panic, by default: the fresh instance follows this hook)
	// or stops it (the restart limit passed, or a Decider's Stop) — its
	// state may be broken, so an OnDeactivate that saves state should not
	// save it (Orleans' ApplicationError), though it should still release
	// what the instance holds.
	DeactivationFailed
	numDeactivationReasons
)

// NumDeactivationReasons is the number of defined deactivation reasons, for
// tables indexed by DeactivationReason.
const NumDeactivationReasons = int(numDeactivationReasons)

var deactivationNames = [...]string{
	DeactivationNone:           "none",
	DeactivationIdle:           "idle",
	DeactivationRequested:      "requested",
	DeactivationEvicted:        "evicted",
	DeactivationMemoryPressure: "memory pressure",
	DeactivationStopped:        "stopped",
	DeactivationShutdown:       "shutdown",
	DeactivationFailed:         "failed",
}

func (r DeactivationReason) String() string {
	if r < numDeactivationReasons {
		return deactivationNames[r]
	}
	return "DeactivationReason(" + strconv.Itoa(int(r)) + ")"
}

// deactivationReasoner is what a Self that knows why its grain deactivates
// has besides: the silo's does; a test double may.
type deactivationReasoner interface {
	DeactivationReason() DeactivationReason
}

// DeactivationReason reports why the grain is being deactivated, during
// OnDeactivate; DeactivationNone in any other turn, or when the Self behind
// c does not say (a test double without a DeactivationReason method).
func (c *Context) DeactivationReason() DeactivationReason {
	if c != nil && c.over != nil && c.over.Load() {
		c.afterTurn("DeactivationReason")
	}
	if c == nil || c.self == nil {
		return DeactivationNone
	}
	if r, ok := c.self.(deactivationReasoner); ok {
		return r.DeactivationReason()
	}
	return DeactivationNone
}
