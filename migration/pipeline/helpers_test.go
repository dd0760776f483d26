package pipeline_test

import (
	"database/sql"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migrationtest"
	"github.com/securemsg/storage/migration"
)

// sumFS returns a directory holding files and an atlas.sum over them.
var sumFS = migrationtest.SumFS

func mustDefault(tb testing.TB) *migration.Migrator {
	tb.Helper()
	m, err := migration.Default()
	require.NoError(tb, err)
	return m
}

func exec(tb testing.TB, conn *sql.DB, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		_, err := conn.Exec(s)
		require.NoError(tb, err, s)
	}
}
