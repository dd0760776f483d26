package migration

import (
	"os"
	"strings"
)

// ReadOnlyDSN returns a mattn/go-sqlite3 DSN that opens the database file
// at path read-only and writes nothing, not even beside it, so that status,
// plan, drift and freeze work on a file or in a directory they cannot
// write and leave no -wal or -shm file behind.
//
// A database closed cleanly has everything in the main file: it is opened
// immutable, so SQLite takes no lock and creates no -shm (a plain mode=ro
// connection to a WAL database creates -wal and -shm, and cannot remove
// them). If a -wal or rollback journal is beside it (the database is open
// elsewhere, or was not closed cleanly), their content counts: it is
// opened mode=ro, through them.
func ReadOnlyDSN(path string) string {
	params := "?mode=ro&_txlock=deferred&_busy_timeout=5000"
	if !exists(path+"-wal") && !exists(path+"-journal") {
		params += "&immutable=1"
	}
	return "file:" + URIPath(path) + params
}

// URIPath escapes what SQLite would read as URI syntax in a file name.
func URIPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
