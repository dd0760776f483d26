package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A database in another text encoding than UTF-8 is refused, unchanged:
// SQLite would store a user id that is not valid UTF-8 otherwise than it
// was given, and the row would no longer open under its sealed binding.
func TestOpenRefusesUTF16(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []string{"UTF-16le", "UTF-16be"} {
		t.Run(enc, func(t *testing.T) {
			path := dbPath(t)
			raw, err := sql.Open(sqlitedriver.Name, path)
			require.NoError(t, err)
			for _, stmt := range []string{"PRAGMA encoding = '" + enc + "'", "CREATE TABLE t (x)", "DROP TABLE t"} {
				_, err := raw.Exec(stmt)
				require.NoError(t, err, stmt)
			}
			require.NoError(t, raw.Close())
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			_, err = sqlitestore.Open(ctx, path, storetest.NewKeyring(t))
			require.ErrorIs(t, err, schema.ErrSchemaMismatch)
			require.ErrorContains(t, err, "text encoding "+enc)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
}
