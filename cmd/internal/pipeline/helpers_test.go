package pipeline_test

import (
	_ "github.com/mattn/go-sqlite3"

	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

var (
	// sumFS returns a directory holding files and an atlas.sum over them.
	sumFS       = migrationtest.SumFS
	mustDefault = migrationtest.Default
	exec        = migrationtest.Exec
	// crashCopy copies a database file with the given companions while a
	// writer has them open.
	crashCopy = migrationtest.CopyFiles
)
