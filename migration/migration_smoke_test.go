package migration_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/migration"
)

func TestSmokeUp(t *testing.T) {
	ctx := context.Background()
	conn, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_txlock=immediate")
	require.NoError(t, err)
	m, err := migration.Default()
	require.NoError(t, err)
	st, err := m.Status(ctx, conn)
	require.NoError(t, err)
	t.Logf("%+v", st)
	applied, err := m.Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, []string{"14", "15"}, applied)
	applied, err = m.Up(ctx, conn)
	require.NoError(t, err)
	require.Empty(t, applied)
	st, err = m.Status(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, "15", st.Current)
}
