// Package tamper changes an SQLite database as a writer of its file could,
// behind the back of a store that has it open, for tests that prove the
// store does not believe what it reads. Its statements are built from the
// schema the file holds, so that they hold after the next migration too;
// they are a test tool's, not the store's (which all live in
// queries/*.sql). Only tests import it.
package tamper

import (
	"github.com/securemsg/storage/internal/sqlitedriver"

	"context"
	"database/sql"
	"os"
	"regexp"
	"strings"
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

// WALCopy commits stmts to the database file at src in WAL mode, and
// copies the file and its -wal to dst (dst-wal) while the writer still
// holds them, before its close would checkpoint: dst is a database whose
// last commits, stmts', are in its -wal only, as a crash or a copy of a
// live database leaves it. It returns the bytes of dst and dst-wal.
func WALCopy(tb testing.TB, src, dst string, stmts ...string) (main, wal []byte) {
	tb.Helper()
	ctx := context.Background()
	writer, err := sql.Open(sqlitedriver.Name, "file:"+src+"?_journal_mode=WAL")
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

// ForgeIndex points the root page of index, in the database file at path,
// at a b-tree built for it, as a writer of the file with PRAGMA
// writable_schema can: the entries of a UNIQUE index on columns (as the
// index lists them, "a, b, c") of a scratch table holding rows, each row
// its rowid first, then one value per column. The scratch table and
// index are then removed from sqlite_master, their pages kept, so that
// every object's text stays the migrations' and no two objects share a
// root page. The index then maps the values of each row to its rowid,
// whatever the table holds there.
func ForgeIndex(tb testing.TB, path, index, columns string, rows ...[]any) {
	tb.Helper()
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path)
	require.NoError(tb, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		tb.Helper()
		_, err := conn.Exec(q, args...)
		require.NoError(tb, err, q)
	}
	exec("CREATE TABLE forged_rows (" + columns + ")")
	exec("CREATE UNIQUE INDEX forged_index ON forged_rows (" + columns + ")")
	marks := "?" + strings.Repeat(", ?", strings.Count(columns, ","))
	for _, r := range rows {
		exec("INSERT INTO forged_rows (rowid, "+columns+") VALUES (?, "+marks+")", r...)
	}
	exec("PRAGMA writable_schema = ON")
	res, err := conn.Exec("UPDATE sqlite_master SET rootpage = (SELECT rootpage FROM sqlite_master WHERE name = 'forged_index') WHERE type = 'index' AND name = ?", index)
	require.NoError(tb, err)
	n, err := res.RowsAffected()
	require.NoError(tb, err)
	require.Equal(tb, int64(1), n, "index %s", index)
	exec("DELETE FROM sqlite_master WHERE name IN ('forged_rows', 'forged_index')")
	exec("PRAGMA writable_schema = OFF")
}

// PointRoot sets the root page of object (a table or an index), in the
// database file at path, to that of other: the two then share one
// b-tree, every text unchanged.
func PointRoot(tb testing.TB, path, object, other string) {
	tb.Helper()
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path)
	require.NoError(tb, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	_, err = conn.Exec("PRAGMA writable_schema = ON")
	require.NoError(tb, err)
	res, err := conn.Exec("UPDATE sqlite_master SET rootpage = (SELECT rootpage FROM sqlite_master WHERE name = ?) WHERE name = ?", other, object)
	require.NoError(tb, err)
	n, err := res.RowsAffected()
	require.NoError(tb, err)
	require.Equal(tb, int64(1), n, "object %s", object)
}
