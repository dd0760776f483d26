package migration_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/store/sqlitestore"
)

// plantUselessStats are sqlite_stat1 rows claiming that every index of
// pending_outbound_message is useless but its UNIQUE one, which then
// looks like a perfect key: planned with them, each step of the
// recipients' listing reads all of a recipient's rows and sorts them.
var plantUselessStats = []string{
	"ANALYZE",
	"DELETE FROM sqlite_stat1",
	`INSERT INTO sqlite_stat1 VALUES
		('pending_outbound_message', 'pending_outbound_message_recipient', '1000000 1000000 1000000 1000000'),
		('pending_outbound_message', 'sqlite_autoindex_pending_outbound_message_1', '1000000 1 1 1')`,
}

// recipientsQuery is the store's listing of recipients
// (PendingOutboundRecipients in queries/recipients.sql), its parameters
// as :name.
func recipientsQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "queries", "recipients.sql"))
	require.NoError(t, err)
	q := string(b)
	start := strings.Index(q, "-- name: PendingOutboundRecipients ")
	require.GreaterOrEqual(t, start, 0)
	q = q[start:]
	if next := strings.Index(q[1:], "-- name: "); next >= 0 {
		q = q[:next+1]
	}
	// Comments may hold a semicolon: the statement ends at the last one.
	q = q[:strings.LastIndex(q, ";")]
	return regexp.MustCompile(`sqlc\.arg\((\w+)\)`).ReplaceAllString(q, ":$1")
}

// plan is the EXPLAIN QUERY PLAN of query on conn, one detail a line.
func plan(t *testing.T, conn *sql.DB, query string) string {
	t.Helper()
	args := []any{sql.Named("after_device_id", 0), sql.Named("after_user_id", ""), sql.Named("row_limit", 21),
		sql.Named("dense_entries", 16), sql.Named("sparse_run", 4)}
	rows, err := conn.Query("EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		out = append(out, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(out, "\n")
}

func statRows(t *testing.T, conn *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow("SELECT count(*) FROM sqlite_stat1").Scan(&n))
	return n
}

// Planted statistics are not planned with: Up (which Open runs) deletes
// them in its transaction and the connection that had loaded them plans
// the recipients' listing as on a file that never had any, the plan
// queries/PLANS.md shows (the per-recipient index, no sort).
func TestUpClearsPlantedStatistics(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	query := recipientsQuery(t)

	clean, err := sql.Open(sqlitedriver.Name, "file:"+filepath.Join(t.TempDir(), "clean.db"))
	require.NoError(t, err)
	defer clean.Close()
	_, err = m.Up(ctx, clean)
	require.NoError(t, err)
	want := plan(t, clean, query)
	require.Contains(t, want, "USING COVERING INDEX pending_outbound_message_recipient")
	require.NotContains(t, want, "TEMP B-TREE")

	conn, err := sql.Open(sqlitedriver.Name, "file:"+filepath.Join(t.TempDir(), "client.db"))
	require.NoError(t, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1) // one connection, as the store's: the one that loaded them
	_, err = m.Up(ctx, conn)
	require.NoError(t, err)
	for _, s := range plantUselessStats {
		_, err := conn.Exec(s)
		require.NoError(t, err, s)
	}
	_, err = conn.Exec("ANALYZE sqlite_master") // loaded, as a later start would
	require.NoError(t, err)
	planted := plan(t, conn, query)
	require.NotEqual(t, want, planted, "the planted statistics change the plan")
	require.Contains(t, planted, "TEMP B-TREE")

	applied, err := m.Up(ctx, conn)
	require.NoError(t, err)
	require.Empty(t, applied)
	require.Zero(t, statRows(t, conn))
	require.Equal(t, want, plan(t, conn, query), "the connection forgot them")
}

// Open clears them from the file too, and a refused Open leaves them
// (nothing is written before the schema check passes).
func TestOpenClearsPlantedStatistics(t *testing.T) {
	ctx := context.Background()
	path, keys := storeFile(t)
	doctor(t, nil, path, plantUselessStats...)

	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path)
	require.NoError(t, err)
	defer conn.Close()
	require.Zero(t, statRows(t, conn))
	require.NoError(t, conn.Close())

	doctor(t, nil, path, append(plantUselessStats, "CREATE TABLE stash (v BLOB)")...)
	before := fileHash(t, path)
	_, err = sqlitestore.Open(ctx, path, keys)
	require.Error(t, err)
	require.Equal(t, before, fileHash(t, path))
}
