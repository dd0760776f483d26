// Package tamper changes an SQLite database as a writer of its file could,
// behind the back of a store that has it open, for tests that prove the
// store does not believe what it reads. Its statements are built from the
// schema the file holds, so that they hold after the next migration too;
// they are a test tool's, not the store's (which all live in
// queries/*.sql). Only tests import it.
package tamper

import (
	"context"
	"database/sql"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// PendingTable is the table of pending outbound messages.
const PendingTable = "pending_outbound_message"

// RecipientNoCase rebuilds the pending table of the database behind conn
// (an open store's connection, internal/sqliteaccess.DB) with the
// recipient's user id declared COLLATE NOCASE: every row, index and the
// sequence high-water mark kept, but SQL then matches "Bob" for "bob"
// wherever the store selects, counts or deletes a recipient's rows.
func RecipientNoCase(tb testing.TB, conn *sql.DB) {
	tb.Helper()
	ctx := context.Background()
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(tb, err)
	defer func() { _ = tx.Rollback() }()
	var table string
	require.NoError(tb, tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, PendingTable).Scan(&table))
	column := regexp.MustCompile(`(?i)(\brecipient_user_id\s+TEXT)\b`)
	require.Len(tb, column.FindAllString(table, -1), 1, "one recipient user id column in %s", table)
	table = column.ReplaceAllString(table, "$1 COLLATE NOCASE")
	table = regexp.MustCompile(`(?i)^CREATE TABLE\s+"?`+PendingTable+`"?`).ReplaceAllString(table, "CREATE TABLE doctored")
	var indexes []string
	rows, err := tx.QueryContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`, PendingTable)
	require.NoError(tb, err)
	for rows.Next() {
		var s string
		require.NoError(tb, rows.Scan(&s))
		indexes = append(indexes, s)
	}
	require.NoError(tb, rows.Err())
	var highWater int64
	require.NoError(tb, tx.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = ?`, PendingTable).Scan(&highWater))
	for _, stmt := range append([]string{
		table,
		`INSERT INTO doctored SELECT * FROM ` + PendingTable,
		`DROP TABLE ` + PendingTable,
		`ALTER TABLE doctored RENAME TO ` + PendingTable,
	}, indexes...) {
		_, err := tx.ExecContext(ctx, stmt)
		require.NoError(tb, err, stmt)
	}
	_, err = tx.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = ? WHERE name = ?`, highWater, PendingTable)
	require.NoError(tb, err)
	require.NoError(tb, tx.Commit())
}
