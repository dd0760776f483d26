package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/internal/testkit/tamper"
	"github.com/stretchr/testify/require"
)

// up refuses a file whose -wal holds what it refuses (a view committed
// into the -wal only), exit 1, and leaves the file and its -wal as it
// found them: not checkpointed, not removed (SQLite's -shm may stay).
func TestUpRefusedFileKeepsItsWAL(t *testing.T) {
	// The view is committed into the -wal only, as a crash or a copy of a
	// live database leaves it.
	db := filepath.Join(t.TempDir(), "copy.db")
	main, wal := tamper.WALCopy(t, v14DB(t), db, "CREATE VIEW planted AS SELECT 1")
	read := func() (main, wal []byte) {
		main, err := os.ReadFile(db)
		require.NoError(t, err)
		wal, err = os.ReadFile(db + "-wal")
		require.NoError(t, err)
		return main, wal
	}

	code, _, stderr := runCmd(t, "up", "-db", db)
	require.Equal(t, exitFinding, code, stderr)
	require.Contains(t, stderr, "1 schema object(s) no migration defines")
	gotMain, gotWAL := read()
	require.Equal(t, main, gotMain, "the file")
	require.Equal(t, wal, gotWAL, "its -wal")
}
