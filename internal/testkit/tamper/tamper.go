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
	"os"
	"regexp"
	"testing"

	_ "github.com/mattn/go-sqlite3" // WALCopy's writer
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

// WALCopy commits stmts to the database file at src in WAL mode, and
// copies the file and its -wal to dst (dst-wal) while the writer still
// holds them, before its close would checkpoint: dst is a database whose
// last commits, stmts', are in its -wal only, as a crash or a copy of a
// live database leaves it. It returns the bytes of dst and dst-wal.
func WALCopy(tb testing.TB, src, dst string, stmts ...string) (main, wal []byte) {
	tb.Helper()
	ctx := context.Background()
	writer, err := sql.Open("sqlite3", "file:"+src+"?_journal_mode=WAL")
	require.NoError(tb, err)
	defer writer.Close()
	c, err := writer.Conn(ctx)
	require.NoError(tb, err)
	defer c.Close()
	for _, stmt := range append([]string{"PRAGMA wal_autocheckpoint = 0"}, stmts...) {
		_, err := c.ExecContext(ctx, stmt)
		require.NoError(tb, err, stmt)
	}
	for _, side := range []string{"", "-wal"} {
		b, err := os.ReadFile(src + side)
		require.NoError(tb, err)
		require.NoError(tb, os.WriteFile(dst+side, b, 0o600))
		if side == "" {
			main = b
		} else {
			wal = b
		}
	}
	require.NotEmpty(tb, wal, "the commits are in the -wal")
	return main, wal
}
