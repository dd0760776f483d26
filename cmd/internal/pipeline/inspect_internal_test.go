package pipeline

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
	"github.com/stretchr/testify/require"
)

// indexTables creates tables whose indexes are of every origin: a primary
// key, a UNIQUE constraint, a named, a partial and an expression index.
func indexTables(t *testing.T, conn *sql.DB) {
	t.Helper()
	for _, s := range []string{
		"CREATE TABLE a (id INTEGER PRIMARY KEY, u TEXT UNIQUE, v TEXT, w INTEGER)",
		"CREATE INDEX a_v ON a (v)",
		"CREATE UNIQUE INDEX a_w_partial ON a (w) WHERE w > 0",
		"CREATE INDEX a_expr ON a (lower(v), w DESC)",
		"CREATE TABLE b (x TEXT, y TEXT, PRIMARY KEY (x, y)) WITHOUT ROWID",
		"CREATE INDEX b_y ON b (y)",
		"CREATE TABLE \"it's\" (z)",
		"CREATE INDEX \"it's_z\" ON \"it's\" (z)",
	} {
		_, err := conn.Exec(s)
		require.NoError(t, err, s)
	}
}

// recorder records the queries Atlas's inspector sends.
type recorder struct {
	linearIndexes
	queries *[]string
}

func (r recorder) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	*r.queries = append(*r.queries, query)
	return r.linearIndexes.QueryContext(ctx, query, args...)
}

// The index listing Atlas's inspector sends is the one linearIndexes
// replaces (an Atlas upgrade that changes it fails here, not silently
// slow), and the replacement lists the same rows in the same order.
func TestLinearIndexesReplacesAtlasQuery(t *testing.T) {
	ctx := context.Background()
	conn, err := OpenMemory(ctx)
	require.NoError(t, err)
	defer conn.Close()
	indexTables(t, conn)

	var queries []string
	drv, err := sqlite.Open(recorder{linearIndexes{conn}, &queries})
	require.NoError(t, err)
	_, err = drv.InspectSchema(ctx, "", &schema.InspectOptions{Tables: []string{"a", "b"}})
	require.NoError(t, err)
	matched := map[string]bool{}
	for _, q := range queries {
		if m := atlasIndexesRE.FindStringSubmatch(q); m != nil {
			matched[m[1]] = true
		}
	}
	require.Equal(t, map[string]bool{"a": true, "b": true}, matched, "one index listing per table, in the form atlasIndexesRE reads")

	rows := func(q string) [][]any {
		r, err := conn.QueryContext(ctx, q)
		require.NoError(t, err)
		defer r.Close()
		var out [][]any
		for r.Next() {
			var name, origin string
			var unique, partial bool
			var stmt sql.NullString
			require.NoError(t, r.Scan(&name, &unique, &origin, &partial, &stmt))
			out = append(out, []any{name, unique, origin, partial, stmt})
		}
		require.NoError(t, r.Err())
		return out
	}
	for _, table := range []string{"a", "b", "it''s"} {
		t.Run(table, func(t *testing.T) {
			atlas := "SELECT `il`.`name`, `il`.`unique`, `il`.`origin`, `il`.`partial`, `m`.`sql` FROM pragma_index_list('" + table + "') AS il JOIN sqlite_master AS m ON il.name = m.name"
			m := atlasIndexesRE.FindStringSubmatch(atlas)
			require.NotNil(t, m)
			want := rows(atlas)
			require.NotEmpty(t, want)
			require.Equal(t, want, rows(fmt.Sprintf(linearIndexesQuery, m[1])))
		})
	}
}
