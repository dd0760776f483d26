package schema

import "errors"

// Errors of a database's schema against this directory, returned
// (wrapped, with what they name) by sqlitestore.Open and by the migrate
// command; nothing is changed when one is returned. Check them with
// errors.Is.
var (
	// ErrChecksum means the migration directory does not match its
	// atlas.sum.
	ErrChecksum = errors.New("migration directory does not match atlas.sum")
	// ErrNewerDatabase means the database records a schema version newer
	// than this directory's head: it was written by a newer release.
	ErrNewerDatabase = errors.New("database is newer than this code")
	// ErrUnknownState means the database holds tables but no schema
	// history this code can place it at.
	ErrUnknownState = errors.New("database has no recognisable schema history")
	// ErrOutOfOrder means the directory holds a migration file whose
	// version is at or below the database's version without being in its
	// history: it was added below the last applied version, so it would
	// never run on this database while a new one gets it.
	ErrOutOfOrder = errors.New("migration file added below the database's version")
	// ErrUnknownObject means the database holds a table, index, view or
	// trigger that no migration defines: something else created it (a
	// planted trigger would run inside the store's own transactions), so
	// the database is not used. The message names each object.
	ErrUnknownObject = errors.New("schema object no migration defines")
	// ErrSchemaMismatch means a table or index the migrations define at
	// the database's version has another definition in the database (a
	// column's type, collation, NOT NULL or default, a generated column,
	// the primary key, a UNIQUE, CHECK or foreign key constraint, WITHOUT
	// ROWID or STRICT; an index's table, columns, collations,
	// expressions, UNIQUE or partial WHERE), or is missing: the store's
	// queries would run on a table that only has the expected name; or
	// the database's text encoding is not UTF-8, the migrations'; or
	// SQLite cannot load the schema at all (a stored definition it cannot
	// parse, an object whose root page is another's); or a table or index
	// whose b-tree another table or index shares, or whose root page is no
	// page, whatever its text. The
	// message names each object and what differs; nothing is changed.
	ErrSchemaMismatch = errors.New("schema object differs from its migration's definition")
)
