package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
)

// up refuses a file whose -wal holds what it refuses (a view committed
// into the -wal only), exit 1, and leaves the file and its -wal as it
// found them: not checkpointed, not removed, no -shm left behind.
func TestUpRefusedFileKeepsItsWAL(t *testing.T) {
	ctx := context.Background()
	src := v14DB(t)
	writer, err := sql.Open("sqlite3", sqliteaccess.DSN(src))
	require.NoError(t, err)
	c, err := writer.Conn(ctx)
	require.NoError(t, err)
	for _, stmt := range []string{"PRAGMA journal_mode = WAL", "PRAGMA wal_autocheckpoint = 0", "CREATE VIEW planted AS SELECT 1"} {
		_, err := c.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	// Copied while the writer holds them, before its close checkpoints.
	db := filepath.Join(t.TempDir(), "copy.db")
	for _, side := range []string{"", "-wal"} {
		b, err := os.ReadFile(src + side)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(db+side, b, 0o600))
	}
	require.NoError(t, c.Close())
	require.NoError(t, writer.Close())
	read := func() (main, wal []byte) {
		main, err := os.ReadFile(db)
		require.NoError(t, err)
		wal, err = os.ReadFile(db + "-wal")
		require.NoError(t, err)
		return main, wal
	}
	main, wal := read()
	require.NotEmpty(t, wal)

	code, _, stderr := runCmd(t, "up", "-db", db)
	require.Equal(t, exitFinding, code, stderr)
	require.Contains(t, stderr, "1 schema object(s) no migration defines")
	gotMain, gotWAL := read()
	require.Equal(t, main, gotMain, "the file")
	require.Equal(t, wal, gotWAL, "its -wal")
	require.NoFileExists(t, db+"-shm")
}
