// Package nilarg tells a nil argument from a usable one, including a nil
// pointer (or map, slice, func, channel) held in an interface, which
// compares unequal to nil and panics at its first method call.
package nilarg

import "reflect"

// Is reports whether v is nil or an interface holding a nil pointer, map,
// slice, func or channel.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	default:
		return false
	}
}
