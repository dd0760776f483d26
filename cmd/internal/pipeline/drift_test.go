package pipeline_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
)

// Each in-memory database is its own: a table created in one is not seen
// by another opened at the same time (they share SQLite's cache by name).
func TestOpenMemoryIsPrivate(t *testing.T) {
	ctx := context.Background()
	a, err := pipeline.OpenMemory(ctx)
	require.NoError(t, err)
	defer a.Close()
	b, err := pipeline.OpenMemory(ctx)
	require.NoError(t, err)
	defer b.Close()
	_, err = a.ExecContext(ctx, "CREATE TABLE only_in_a (x)")
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		conn *sql.DB
		want int
	}{{"a", a, 1}, {"b", b, 0}} {
		t.Run(tt.name, func(t *testing.T) {
			var n int
			require.NoError(t, tt.conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'only_in_a'").Scan(&n))
			require.Equal(t, tt.want, n)
		})
	}
	var fk int
	require.NoError(t, b.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))
	require.Equal(t, 1, fk)
}
