package silo

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/granary-go/granary/grain"
)

// checkHooks refuses a grain type whose OnActivate or OnDeactivate would
// never run: a method of that name whose signature is not the hook's, or
// one declared on *T while the factory returns a T. Go compiles either, and
// the silo, finding no grain.Activator or grain.Deactivator, would skip the
// hook without a word — state never loaded, never saved.
func checkHooks(kind string, t reflect.Type) error {
	if t == nil || t.Kind() == reflect.Interface {
		return nil // known only at activation; the interface's methods are the grain's
	}
	hooks := [...]reflect.Type{reflect.TypeFor[grain.Activator](), reflect.TypeFor[grain.Deactivator]()}
	for _, iface := range hooks {
		if t.Implements(iface) {
			continue
		}
		want := iface.Method(0)
		m, ok := t.MethodByName(want.Name)
		onPtr := false
		if !ok && t.Kind() != reflect.Pointer {
			m, ok = reflect.PointerTo(t).MethodByName(want.Name)
			onPtr = ok
		}
		switch {
		case !ok:
			continue // no hook of that name: none wanted
		case onPtr && reflect.PointerTo(t).Implements(iface):
			return fmt.Errorf("%w: kind %q: %s is declared on *%v, but the factory returns a %v, which has no such method: it would never run; return a pointer",
				grain.ErrInvalidConfig, kind, want.Name, t, t)
		default:
			return fmt.Errorf("%w: kind %q: %v's %s is %v, not %v: it would never run",
				grain.ErrInvalidConfig, kind, m.Type.In(0), want.Name, withoutReceiver(m.Type), want.Type)
		}
	}
	return nil
}

// withoutReceiver returns a method's type as its callers see it.
func withoutReceiver(m reflect.Type) reflect.Type {
	in := make([]reflect.Type, 0, m.NumIn()-1)
	for i := 1; i < m.NumIn(); i++ {
		in = append(in, m.In(i))
	}
	out := make([]reflect.Type, m.NumOut())
	for i := range out {
		out[i] = m.Out(i)
	}
	return reflect.FuncOf(in, out, m.IsVariadic())
}

// dynamicHooks returns the check of a kind whose factory returns an
// interface: each concrete type it builds is checked once, at its first
// activation, which fails (a *grain.ActivationError wrapping
// ErrInvalidConfig) if a hook would never run.
func dynamicHooks(kind string) func(grain.Grain) error {
	var checked sync.Map // reflect.Type → error, nil for none
	return func(g grain.Grain) error {
		t := reflect.TypeOf(g)
		if v, ok := checked.Load(t); ok {
			err, _ := v.(error)
			return err
		}
		err := checkHooks(kind, t)
		checked.Store(t, err)
		return err
	}
}
