package sqlitestore_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/store/sqlitestore"
)

// nextPlan is EXPLAIN QUERY PLAN of a retry step's query shape (the next
// pending message of one recipient) on conn.
func nextPlan(t *testing.T, conn *sql.DB) string {
	t.Helper()
	rows, err := conn.Query(`EXPLAIN QUERY PLAN SELECT sequence, sealed FROM pending_outbound_message
		WHERE recipient_user_id = 'bob' AND recipient_device_id = 1 AND sequence >= 0 ORDER BY sequence LIMIT 1`)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(plan, "; ")
}

// Planner statistics a writer planted, the "unordered" flag included
// (which SQLite's reload of the statistics does not reset on a
// connection that loaded it), never reach the store's plans: after Open
// the store's own connection plans as on a file never analysed.
func TestPlantedStatisticsNeverPlan(t *testing.T) {
	dir := t.TempDir()
	kr := keyring(t)
	open := func(path string) *sqlitestore.Store {
		s, err := sqlitestore.Open(t.Context(), path, kr)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	clean := filepath.Join(dir, "clean.db")
	want := nextPlan(t, sqliteaccess.DB(open(clean)))
	require.Contains(t, want, "pending_outbound_message_recipient", "the retry step seeks the recipient index")

	planted := filepath.Join(dir, "planted.db")
	s := open(planted)
	require.NoError(t, s.Close())
	raw, err := sql.Open(sqlitedriver.Name, planted)
	require.NoError(t, err)
	for _, q := range []string{
		`ANALYZE`,
		`DELETE FROM sqlite_stat1`,
		`INSERT INTO sqlite_stat1 VALUES
			('pending_outbound_message', 'pending_outbound_message_recipient', '100000 4000 4000 1 unordered'),
			('pending_outbound_message', 'sqlite_autoindex_pending_outbound_message_1', '100000 4000 4000 1 unordered')`,
	} {
		_, err := raw.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, raw.Close())

	s = open(planted)
	require.Equal(t, want, nextPlan(t, sqliteaccess.DB(s)), "the store plans with statistics it did not write")
	var n int
	require.NoError(t, sqliteaccess.DB(s).QueryRow(`SELECT count(*) FROM sqlite_stat1`).Scan(&n))
	require.Zero(t, n, "the planted rows are gone from the file")
}
