package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/internal/testkit/tamper"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A refused file whose -wal holds what is refused (a view planted and
// committed into the -wal only) is left as it was found: the -wal is not
// checkpointed into the file nor removed (SQLite's -shm may stay), and the
// file is refused again the same way. Once the view is dropped, it opens
// with every message.
func TestRefusedFileKeepsItsWAL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "client.db")
	keys := storetest.NewKeyring(t)
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	insert(t, s, alice, 1)
	require.NoError(t, s.Close())

	// The view is committed into the -wal only, as a crash or a copy of a
	// live database leaves it.
	copied := filepath.Join(t.TempDir(), "copy.db")
	main, wal := tamper.WALCopy(t, path, copied, "CREATE VIEW planted AS SELECT 1")
	read := func() (main, wal []byte) {
		main, err := os.ReadFile(copied)
		require.NoError(t, err)
		wal, err = os.ReadFile(copied + "-wal")
		require.NoError(t, err)
		return main, wal
	}
	for range 2 {
		_, err = sqlitestore.Open(ctx, copied, keys)
		require.ErrorIs(t, err, schema.ErrUnknownObject)
		require.ErrorContains(t, err, "planted")
		gotMain, gotWAL := read()
		require.Equal(t, main, gotMain, "the file")
		require.Equal(t, wal, gotWAL, "its -wal")
		require.Subset(t, []string{"copy.db", "copy.db-shm", "copy.db-wal"}, entries(t, filepath.Dir(copied)))
	}
	raw, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(copied))
	require.NoError(t, err)
	_, err = raw.Exec("DROP VIEW planted")
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	s, err = sqlitestore.Open(ctx, copied, keys)
	require.NoError(t, err)
	defer s.Close()
	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}
