package pipeline_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
)

// planted returns a database file at head holding n planted tables and n
// planted indexes on one of head's tables.
func planted(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	m := mustDefault(t)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("planted%d.db", n))
	conn, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	require.NoError(t, err)
	defer conn.Close()
	_, err = m.Up(ctx, conn)
	require.NoError(t, err)
	var table, column string
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT m.name, c.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'schema_revision' LIMIT 1").Scan(&table, &column))
	var b strings.Builder
	b.WriteString("BEGIN;")
	for i := range n {
		fmt.Fprintf(&b, "CREATE TABLE planted_%d (a INTEGER PRIMARY KEY, b TEXT UNIQUE);", i)
		fmt.Fprintf(&b, "CREATE INDEX planted_index_%d ON %s (%s);", i, table, column)
	}
	b.WriteString("COMMIT;")
	_, err = conn.ExecContext(ctx, b.String())
	require.NoError(t, err)
	return path
}

// driftTime returns the fastest of three Drift runs on the file at path,
// and the number of differences it found.
func driftTime(t *testing.T, path string) (time.Duration, int) {
	t.Helper()
	ctx := context.Background()
	m := mustDefault(t)
	best, found := time.Duration(1<<62), 0
	for range 3 {
		start := time.Now()
		require.NoError(t, pipeline.ReadStable(ctx, path, func(conn *sql.DB) error {
			d, err := pipeline.Drift(ctx, m, conn)
			found = len(d.Found)
			return err
		}))
		best = min(best, time.Since(start))
	}
	return best, found
}

// Reading a schema is linear in its size: eight times the planted tables
// and indexes take about eight times as long, not sixty-four (Atlas's
// inspector alone lists each table's indexes with a scan of the whole
// schema, a square in either). The bound is generous, a third of the way
// from linear to square, so a busy machine does not fail it.
func TestDriftLinearInPlantedObjects(t *testing.T) {
	const small, factor = 250, 8
	smallPath, bigPath := planted(t, small), planted(t, small*factor)
	tSmall, nSmall := driftTime(t, smallPath)
	tBig, nBig := driftTime(t, bigPath)
	require.Equal(t, 2*small, nSmall, "every planted table and index is a difference")
	require.Equal(t, 2*small*factor, nBig, "every planted table and index is a difference")
	t.Logf("%d planted: %v; %d planted: %v", small, tSmall, small*factor, tBig)
	require.Less(t, tBig, tSmall*3*factor, "%d planted objects took %v, %d took %v: not linear", 2*small, tSmall, 2*small*factor, tBig)
}
