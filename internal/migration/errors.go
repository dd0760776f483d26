package migration

import "errors"

// ErrDirectory means a migration directory itself is malformed. The
// errors of a database against the directory are package schema's.
var ErrDirectory = errors.New("migration: malformed migration directory")
