package pipeline

import (
	"context"
	"database/sql"
	"testing"

	"ariga.io/atlas/sql/schema"
	"github.com/stretchr/testify/require"
)

// objectDrift sees what Atlas's inspection does not: a view or trigger
// only in the database is dropped, one only in head is created, one whose
// SQL differs is dropped and created again, and an equal one is left out.
func TestObjectDrift(t *testing.T) {
	ctx := context.Background()
	got, err := OpenMemory(ctx)
	require.NoError(t, err)
	defer got.Close()
	head, err := OpenMemory(ctx)
	require.NoError(t, err)
	defer head.Close()
	exec := func(stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			_, err := got.ExecContext(ctx, s)
			require.NoError(t, err, s)
			_, err = head.ExecContext(ctx, s)
			require.NoError(t, err, s)
		}
	}
	exec("CREATE TABLE t (x INTEGER)", "CREATE VIEW same AS SELECT x FROM t")
	_, err = got.ExecContext(ctx, "CREATE TRIGGER changed AFTER INSERT ON t BEGIN SELECT 1; END")
	require.NoError(t, err)
	_, err = got.ExecContext(ctx, "CREATE VIEW only_here AS SELECT 1")
	require.NoError(t, err)
	_, err = head.ExecContext(ctx, "CREATE TRIGGER changed AFTER INSERT ON t BEGIN SELECT 2; END")
	require.NoError(t, err)
	_, err = head.ExecContext(ctx, "CREATE VIEW only_head AS SELECT 2")
	require.NoError(t, err)

	changes, found, err := objectDrift(ctx, got, head)
	require.NoError(t, err)
	var sqls []string
	for _, c := range changes {
		require.NotEmpty(t, c.Comment)
		sqls = append(sqls, c.SQL)
	}
	require.Equal(t, []string{
		"DROP TRIGGER `changed`",
		"CREATE TRIGGER changed AFTER INSERT ON t BEGIN SELECT 2; END",
		"CREATE VIEW only_head AS SELECT 2",
		"DROP VIEW `only_here`",
	}, sqls)
	var words []string
	for _, f := range found {
		words = append(words, f.String())
	}
	require.Equal(t, []string{
		"table t: trigger changed differs: database CREATE TRIGGER changed AFTER INSERT ON t BEGIN SELECT 1; END, head CREATE TRIGGER changed AFTER INSERT ON t BEGIN SELECT 2; END",
		"table only_head: view only_head is at head, missing from the database",
		"table only_here: view only_here is in the database, not at head",
	}, words)

	none, noneFound, err := objectDrift(ctx, head, head)
	require.NoError(t, err)
	require.Empty(t, none)
	require.Empty(t, noneFound)
}

// schemaDrift's statements quote every name read from the database: one
// holding a backtick stays one identifier, and a table named like the
// placeholder planQuoted plans such a name under keeps its own name. The
// comments name each object as Atlas does, Go-quoted.
func TestSchemaDriftQuotesNames(t *testing.T) {
	fkOff := SchemaChange{Comment: "disable the enforcement of foreign-keys constraints", SQL: "PRAGMA foreign_keys = off"}
	fkOn := SchemaChange{Comment: "enable back the enforcement of foreign-keys constraints", SQL: "PRAGMA foreign_keys = on"}
	tests := []struct {
		name  string
		plant []string
		want  []SchemaChange
	}{
		{
			name:  "table",
			plant: []string{"CREATE TABLE \"a`; DELETE FROM t; --\" (x)"},
			want:  []SchemaChange{fkOff, {Comment: "drop \"a`; DELETE FROM t; --\" table", SQL: "DROP TABLE `a``; DELETE FROM t; --`"}, fkOn},
		},
		{
			name:  "index",
			plant: []string{"CREATE INDEX \"i`\"\"\" ON t (x)"},
			want:  []SchemaChange{{Comment: `drop index "i` + "`" + `\"" from table: "t"`, SQL: "DROP INDEX `i``\"`"}},
		},
		{
			name:  "view",
			plant: []string{"CREATE VIEW \"v`\" AS SELECT 1"},
			want:  []SchemaChange{{Comment: "drop view \"v`\" on \"v`\": not in head as it is", SQL: "DROP VIEW `v```"}},
		},
		{
			name: "a table named like a placeholder",
			plant: []string{
				"CREATE TABLE drift_quoted_name_1_ (x)",
				"CREATE TABLE \"b`\" (x)",
				"CREATE INDEX \"drift_quoted_name_2_`\" ON t (x)",
			},
			want: []SchemaChange{
				fkOff,
				{Comment: "drop index \"drift_quoted_name_2_`\" from table: \"t\"", SQL: "DROP INDEX `drift_quoted_name_2_```"},
				{Comment: "drop \"drift_quoted_name_1_\" table", SQL: "DROP TABLE `drift_quoted_name_1_`"},
				{Comment: "drop \"b`\" table", SQL: "DROP TABLE `b```"},
				fkOn,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			got, err := OpenMemory(ctx)
			require.NoError(t, err)
			defer got.Close()
			head, err := OpenMemory(ctx)
			require.NoError(t, err)
			defer head.Close()
			for _, c := range []*sql.DB{got, head} {
				_, err := c.ExecContext(ctx, "CREATE TABLE t (x INTEGER)")
				require.NoError(t, err)
			}
			for _, s := range tt.plant {
				_, err := got.ExecContext(ctx, s)
				require.NoError(t, err, s)
			}
			d, err := schemaDrift(ctx, got, head)
			require.NoError(t, err)
			require.Equal(t, tt.want, d.Schema)
		})
	}
}

// A name Atlas writes into a statement other than as an identifier of its
// own (here an unnamed UNIQUE index it names after its table and column)
// cannot be quoted: planQuoted fails rather than show that statement.
func TestPlanQuotedRefusesWhatItCannotQuote(t *testing.T) {
	col := &schema.Column{Name: "c`", Type: &schema.ColumnType{Type: &schema.IntegerType{T: "integer"}}}
	idx := &schema.Index{Name: "sqlite_autoindex_t_1", Unique: true, Parts: []*schema.IndexPart{{C: col}}}
	got := schema.NewRealm(schema.New("main").AddTables(schema.NewTable("t").AddColumns(col).AddIndexes(idx)))
	headT := schema.NewTable("t").AddColumns(schema.NewIntColumn("x", "integer"))
	head := schema.NewRealm(schema.New("main").AddTables(headT))
	_, err := planQuoted(context.Background(), got, head, []schema.Change{
		&schema.ModifyTable{T: headT, Changes: []schema.Change{&schema.DropIndex{I: idx}}},
	})
	require.ErrorContains(t, err, "\"c`\" cannot be quoted where Atlas writes it")
	require.Equal(t, "c`", col.Name, "the name is written back")
}
