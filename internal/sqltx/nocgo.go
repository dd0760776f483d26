//go:build !cgo

package sqltx

// Without cgo, Go silently builds mattn/go-sqlite3 as a stub that cannot
// open a database, and the build later fails far from the cause. Every
// package that touches SQLite goes through this one, so its build stops
// here first, with the reason in the compiler's message.
var _ int = "this project needs cgo and a C compiler (gcc): install gcc and build with CGO_ENABLED=1"
