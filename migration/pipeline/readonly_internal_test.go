package pipeline

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/require"
)

// A read through the -wal whose -wal is gone by the time it connects (the
// application closed the database meanwhile) fails rather than open the
// file: a read-only open of a WAL database without its -wal creates an
// empty one beside it.
func TestSnapshotConnectorWALGone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "client.db")
	conn, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	require.NoError(t, err)
	_, err = conn.Exec("CREATE TABLE t (x INTEGER)")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.NoFileExists(t, path+"-wal")

	c := snapshotConnector{dsn: readOnlyDSN(path, false), wal: path + "-wal"}
	_, err = c.Connect(ctx)
	require.ErrorIs(t, err, errWALGone)
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, es, 1, "nothing created beside the file")
}
