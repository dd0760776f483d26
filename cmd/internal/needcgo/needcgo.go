// Package needcgo stops a build of the tools without cgo at once, with
// the reason: they read databases through mattn/go-sqlite3, which without
// cgo Go silently builds as a stub, and the build would otherwise fail
// far from the cause, deep in the driver. The library itself needs no
// cgo (its pure-Go driver); only the tools do.
package needcgo
