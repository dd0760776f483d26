package frozen

import "errors"

// Errors returned (wrapped) by this package.
var (
	// ErrExists means Freeze was asked to write into an existing directory.
	ErrExists = errors.New("frozen: fixture directory already exists (fixtures are never overwritten)")
	// ErrNotHead means the database to freeze is not exactly at head.
	ErrNotHead = errors.New("frozen: database is not at head")
	// ErrWrongKey means the database's sealed values are not sealed with the
	// published fixture test key.
	ErrWrongKey = errors.New("frozen: database is not sealed with the fixture test key")
	// ErrBadName means a fixture directory is not named versionNN after the
	// schema version it holds.
	ErrBadName = errors.New("frozen: fixture directory must be named versionNN after its schema version")
	// ErrNoRows means the database to freeze holds no row outside the
	// migration history: a fixture of it would prove nothing.
	ErrNoRows = errors.New("frozen: database holds no rows outside the migration history (a fixture of it would prove nothing)")
	// ErrNotProved means FreezeNext's source fixture failed its proof at
	// head: its migrated rows would freeze an undeclared change.
	ErrNotProved = errors.New("frozen: the fixture to migrate does not pass fixture-test at head")
)

// ErrDeclared means a declaration file is malformed or names a
// migration, table, row or column that is not there.
var ErrDeclared = errors.New("frozen: declared changes")
