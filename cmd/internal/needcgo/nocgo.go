//go:build !cgo

package needcgo

// The reason, in the compiler's message.
var _ int = "this project needs cgo and a C compiler (gcc): install gcc and build with CGO_ENABLED=1"
