package migrationtest

import (
	"github.com/securemsg/storage/internal/sqlitedriver"

	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Table is a table as a database holds it: what a test builds a
// statement about a real table from (a table rebuild, an INSERT naming
// its columns), never from a list of today's columns, so that the next
// migration (a column added, a table added) breaks no test.
type Table struct {
	Name string
	// Columns are its columns' names, in order (PRAGMA table_info).
	Columns []string
	// Defs are the column definitions and table constraints of its CREATE
	// TABLE as the database stores it, in order, each without comments
	// and with its blanks folded to one space outside quotes ("device_id
	// INTEGER NOT NULL CHECK (device_id >= 0)", "PRIMARY KEY (user_id,
	// device_id)").
	Defs []string
	// Objects are the CREATE INDEX and CREATE TRIGGER statements of its
	// indexes and triggers (not the automatic ones), as stored: what a
	// rebuild creates again after the rename.
	Objects []string
}

// HeadTable returns table as a database migrated to the embedded head
// holds it, failing tb if there is no such table.
func HeadTable(tb testing.TB, table string) Table {
	tb.Helper()
	conn, err := sql.Open(sqlitedriver.Name, "file:"+filepath.Join(tb.TempDir(), "head.db"))
	require.NoError(tb, err)
	defer conn.Close()
	_, err = Default(tb).Up(context.Background(), conn)
	require.NoError(tb, err)
	return TableIn(tb, conn, table)
}

// TableIn returns table as the database conn holds it, failing tb if
// there is no such table.
func TableIn(tb testing.TB, conn *sql.DB, table string) Table {
	tb.Helper()
	t := Table{Name: table}
	var create string
	require.NoError(tb, conn.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&create), "table %s", table)
	t.Columns = Strings(tb, conn, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	t.Objects = Strings(tb, conn, `SELECT sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name = ? AND sql IS NOT NULL ORDER BY rowid`, table)
	t.Defs = tableDefs(create)
	require.NotEmpty(tb, t.Defs, "the definitions of %s in %q", table, create)
	return t
}

// Strings returns the one text column of the rows query (with args)
// returns on conn, in order, failing tb on any error.
func Strings(tb testing.TB, conn *sql.DB, query string, args ...any) []string {
	tb.Helper()
	rows, err := conn.Query(query, args...)
	require.NoError(tb, err, query)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(tb, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(tb, rows.Err())
	return out
}

// tableDefs splits the body of a CREATE TABLE statement (between its
// outer parentheses) at its top-level commas, without comments, each part
// trimmed and its blanks folded to one space outside quotes.
func tableDefs(create string) []string {
	var defs []string
	var cur strings.Builder
	depth := 0
	space := false // a blank is pending in cur
	for i := 0; i < len(create); i++ {
		c := create[i]
		switch {
		case c == '-' && strings.HasPrefix(create[i:], "--"):
			for i < len(create) && create[i] != '\n' {
				i++
			}
			space = true
			continue
		case c == '/' && strings.HasPrefix(create[i:], "/*"):
			end := strings.Index(create[i+2:], "*/")
			if end < 0 {
				i = len(create)
			} else {
				i += 2 + end + 1
			}
			space = true
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
			continue
		}
		if depth == 0 {
			if c == '(' {
				depth = 1
				space = false
			}
			continue // the statement's head
		}
		switch c {
		case '\'', '"', '`', '[':
			closing := c
			if c == '[' {
				closing = ']'
			}
			j := i + 1
			for j < len(create) {
				if create[j] == closing {
					if closing != ']' && j+1 < len(create) && create[j+1] == closing {
						j += 2 // a doubled quote
						continue
					}
					break
				}
				j++
			}
			if space && cur.Len() > 0 {
				cur.WriteByte(' ')
			}
			space = false
			cur.WriteString(create[i:min(j+1, len(create))])
			i = j
			continue
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				defs = append(defs, cur.String())
				return defs
			}
		case ',':
			if depth == 1 {
				defs = append(defs, cur.String())
				cur.Reset()
				space = false
				continue
			}
		}
		if space && cur.Len() > 0 && c != ')' && c != ',' {
			cur.WriteByte(' ')
		}
		space = false
		cur.WriteByte(c)
	}
	return nil
}

// IsColumn reports whether def is the definition of a column of t (its
// first word, unquoted, names one), not a table constraint.
func (t Table) IsColumn(def string) bool {
	return t.column(def) != ""
}

// column returns the column def defines, or "".
func (t Table) column(def string) string {
	w, _, _ := strings.Cut(def, " ")
	if def != "" && strings.ContainsRune("\"`[", rune(def[0])) {
		closing := def[0]
		if closing == '[' {
			closing = ']'
		}
		if end := strings.IndexByte(def[1:], closing); end >= 0 {
			w = def[1 : 1+end] // a quoted name, which may hold blanks
		}
	}
	for _, c := range t.Columns {
		if strings.EqualFold(c, w) {
			return c
		}
	}
	return ""
}

// Def returns the definition of column, or "" if t has none.
func (t Table) Def(column string) string {
	for _, d := range t.Defs {
		if strings.EqualFold(t.column(d), column) {
			return d
		}
	}
	return ""
}

// WithColumn returns t's definitions with def, a column's, added after
// its last column definition (before its table constraints), as ALTER
// TABLE ADD COLUMN adds one.
func (t Table) WithColumn(def string) []string {
	last := -1
	for i, d := range t.Defs {
		if t.IsColumn(d) {
			last = i
		}
	}
	out := append([]string{}, t.Defs[:last+1]...)
	out = append(out, def)
	return append(out, t.Defs[last+1:]...)
}

// Create returns a CREATE TABLE statement of a table name with defs, on
// one line, without the final semicolon.
func Create(name string, defs []string) string {
	return "CREATE TABLE " + name + " (" + strings.Join(defs, ", ") + ")"
}

// ColumnList returns t's columns joined by ", " (for an INSERT's column
// list or a SELECT), leaving out those in except.
func (t Table) ColumnList(except ...string) string {
	var out []string
	for _, c := range t.Columns {
		skip := false
		for _, e := range except {
			skip = skip || strings.EqualFold(c, e)
		}
		if !skip {
			out = append(out, c)
		}
	}
	return strings.Join(out, ", ")
}
