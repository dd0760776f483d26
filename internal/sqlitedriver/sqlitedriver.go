// Package sqlitedriver is the one place that knows which SQLite driver a
// build links: github.com/mattn/go-sqlite3 when cgo is on (mattn.go),
// modernc.org/sqlite, SQLite translated to Go, when it is off
// (modernc.go). An application changes nothing but CGO_ENABLED.
//
// Both drivers bundle SQLite 3.54.1 and write one file format: a file
// written through either opens through the other, and the store's writer
// lock (internal/dblock) and SQLite's own locks hold between two
// processes, one on each. One process never opens a file through both:
// each build links exactly one.
//
// What the rest of the module needs of the driver is here: its
// database/sql name (Name), the data source name parameters that differ
// between the drivers (StoreDSN; the rest of a DSN, mode=, _txlock,
// _busy_timeout, _foreign_keys, _synchronous and _journal_mode, both
// read alike), the four error codes the store tells apart (IsNotADB,
// IsCorrupt, IsUniqueConstraint, IsFull), and a driver value to wrap or
// to open connections with extra settings (New).
package sqlitedriver

// Config is what New sets on every connection its driver opens.
type Config struct {
	// DenyAttach refuses ATTACH, and VACUUM INTO, which attaches its
	// output, with SQLite's authorization error: for SQL text read from
	// files, which then cannot create, change or drop any database file
	// but the one opened.
	DenyAttach bool
	// Collations are registered under their names, each comparing two
	// strings as strings.Compare does.
	Collations map[string]func(a, b string) int
}

// SQLite's result codes (sqlite3.h) the store tells apart.
const (
	codeCorrupt          = 11
	codeFull             = 13
	codeNotADB           = 26
	codeConstraintUnique = 19 | 8<<8 // SQLITE_CONSTRAINT_UNIQUE
)

// IsNotADB reports whether err is SQLite's "file is not a database"
// (SQLITE_NOTADB).
func IsNotADB(err error) bool {
	p, _, ok := code(err)
	return ok && p == codeNotADB
}

// IsCorrupt reports whether err is SQLite's "database disk image is
// malformed" (SQLITE_CORRUPT, any extended code).
func IsCorrupt(err error) bool {
	p, _, ok := code(err)
	return ok && p == codeCorrupt
}

// IsUniqueConstraint reports whether err is a UNIQUE constraint failing
// (SQLITE_CONSTRAINT_UNIQUE; a PRIMARY KEY is another code).
func IsUniqueConstraint(err error) bool {
	_, e, ok := code(err)
	return ok && e == codeConstraintUnique
}

// IsFull reports whether err is SQLite's "database or disk is full"
// (SQLITE_FULL), as an insert reports too when AUTOINCREMENT is at the
// largest int64.
func IsFull(err error) bool {
	p, _, ok := code(err)
	return ok && p == codeFull
}
