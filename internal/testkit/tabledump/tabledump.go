// Package tabledump renders what an SQLite database holds as text, for
// tests that check what a call changed, or that it changed nothing, by
// comparing a dump taken before the call with one taken after it.
//
// It reads every table named in sqlite_master with statements built from
// those names, because it must see every row whatever the schema: these
// are inspection statements of a test tool, not store statements, which
// all live in queries/*.sql. It never writes, and only tests import it.
package tabledump

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tables returns the rows of every table of db, sqlite_sequence included,
// and of sqlite_master itself (the schema), keyed by table name, each
// table's rows as Rows renders them. Two results are equal only if db
// holds the same schema and the same rows, byte for byte. It fails tb on
// any error of db.
func Tables(tb testing.TB, db *sql.DB) map[string][]string {
	tb.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	require.NoError(tb, err)
	tables := []string{"sqlite_master"}
	for rows.Next() {
		var n string
		require.NoError(tb, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(tb, rows.Err())
	require.NoError(tb, rows.Close())
	out := make(map[string][]string, len(tables))
	for _, table := range tables {
		out[table] = Rows(tb, db, table)
	}
	return out
}

// Rows returns every row of table as one line of text, the lines sorted
// (so that the order SQLite returns them in does not matter). A line
// names each column with its value: NULL, an integer or real as a number,
// a TEXT value quoted, a BLOB in hex (x'…'), so that values of different
// storage classes never render alike. It fails tb on any error of db,
// such as a table that does not exist.
func Rows(tb testing.TB, db *sql.DB, table string) []string {
	tb.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT * FROM "+quoteIdent(table))
	require.NoError(tb, err, "table %s", table)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(tb, err)
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(tb, rows.Scan(ptrs...))
		var b strings.Builder
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s=%s", cols[i], literal(v))
		}
		out = append(out, b.String())
	}
	require.NoError(tb, rows.Err(), "table %s", table)
	slices.Sort(out)
	return out
}

// literal renders one value as the driver returns it.
func literal(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return fmt.Sprintf("x'%x'", v)
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		// A column declared DATE, DATETIME or TIMESTAMP comes back parsed.
		return "time(" + v.Format(time.RFC3339Nano) + ")"
	default:
		return fmt.Sprintf("%T(%v)", v, v)
	}
}

// quoteIdent quotes name as an SQLite identifier, doubling any quote in it.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
