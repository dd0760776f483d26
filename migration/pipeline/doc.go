// Package pipeline is the tooling over package migration that cmd/migrate
// is a thin shell over, importable by a pipeline written in Go: it
// compares a database with head (Drift), reads a database file without a
// lock and without creating anything beside it (ReadStable), replays
// migration files statement by statement on a private in-memory database
// (Replay), lints the directory with Atlas's analyzers (Lint), and opens
// connections that cannot ATTACH another database
// file (OpenConfined, OpenMemory).
//
// An application does not link it: sqlitestore.Open needs only package
// migration. Nothing in this package registers a database/sql driver or
// runs at init.
package pipeline
