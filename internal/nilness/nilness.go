// Package nilness tells a nil interface value from one that holds a nil of a
// concrete type — a typed nil, which compares unequal to nil.
package nilness

import "reflect"

// Of reports whether v is nil, or holds a nil pointer, map, slice, func,
// chan or unsafe pointer. It is safe for concurrent use.
func Of(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
