package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/seal"
)

// TestSealedTablesCoverSchema fails when the schema at head gains a table
// with a sealed column (every "sealed" column, and storage_key's
// verifier) that the key rotation would not walk, or loses one it walks.
func TestSealedTablesCoverSchema(t *testing.T) {
	ctx := context.Background()
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	keys, err := seal.NewKeyring(key)
	require.NoError(t, err)
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), keys)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	rows, err := sqliteaccess.DB(s).QueryContext(ctx, `
		SELECT m.name FROM sqlite_schema AS m, pragma_table_info(m.name) AS c
		WHERE m.type = 'table' AND (c.name = 'sealed' OR (m.name = 'storage_key' AND c.name = 'verifier'))
		ORDER BY m.name`)
	require.NoError(t, err)
	defer rows.Close()
	var inSchema []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		inSchema = append(inSchema, name)
	}
	require.NoError(t, rows.Err())

	walked := map[string]bool{}
	for _, tb := range sealedTables {
		require.False(t, walked[tb.name], "%s listed twice", tb.name)
		walked[tb.name] = true
	}
	require.Len(t, walked, len(inSchema))
	for _, name := range inSchema {
		require.True(t, walked[name], "table %s has a sealed column the rotation does not walk", name)
	}
}
