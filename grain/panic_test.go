package grain_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grain"
)

var panicID = grain.NewID("cart", "42")

// recovering runs f and returns what it panicked with, as a grain runtime
// would: Recovered in the deferred function.
func recovering(f func()) (pe *grain.PanicError) {
	defer func() {
		if v := recover(); v != nil {
			pe = grain.Recovered(panicID, v)
		}
	}()
	f()
	return nil
}

//go:noinline
func panicsHere() { panic("kaput") }

//go:noinline
func derefsNil(p *int) int { return *p }

//go:noinline
func recurses(n int) {
	if n == 0 {
		panic("deep")
	}
	recurses(n - 1)
}

// The stack starts at the panic, then the call that panicked; the calls
// that recovered it are left out.
func TestRecoveredTakesTheStackFromThePanic(t *testing.T) {
	pe := recovering(panicsHere)
	require.NotNil(t, pe)
	assert.Equal(t, panicID, pe.ID)
	assert.Equal(t, "kaput", pe.Value)
	lines := strings.Split(pe.Stack(), "\n")
	require.GreaterOrEqual(t, len(lines), 4, pe.Stack())
	assert.Equal(t, "panic(...)", lines[0])
	assert.Contains(t, lines[2], "grain_test.panicsHere(...)")
	assert.Contains(t, lines[3], "panic_test.go:")
	assert.NotContains(t, pe.Stack(), "recovering.func1", "the deferred function that recovered")
	assert.Contains(t, pe.Stack(), "grain_test.recovering(", "the call to the function that panicked")
}

// A runtime error's panic names the line that made it.
func TestRecoveredNamesTheLineOfARuntimeError(t *testing.T) {
	pe := recovering(func() { derefsNil(nil) })
	require.NotNil(t, pe)
	assert.ErrorContains(t, pe, "nil pointer dereference")
	st := pe.Stack()
	assert.True(t, strings.HasPrefix(st, "panic(...)\n"), st)
	assert.Contains(t, st, "grain_test.derefsNil(...)\n\t")
}

// A stack deeper than the bound keeps its innermost calls, and says so.
func TestRecoveredKeepsTheInnermostCallsOfADeepStack(t *testing.T) {
	pe := recovering(func() { recurses(200) })
	require.NotNil(t, pe)
	st := pe.Stack()
	assert.True(t, strings.HasPrefix(st, "panic(...)\n"), st)
	assert.Contains(t, st, "grain_test.recurses(...)")
	assert.True(t, strings.HasSuffix(st, "...additional frames elided...\n"), st)
}

// A PanicError made without Recovered has no stack, and says nothing.
func TestAPanicErrorMadeByHandHasNoStack(t *testing.T) {
	assert.Empty(t, (&grain.PanicError{ID: panicID, Value: "boom"}).Stack())
}
