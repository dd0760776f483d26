package pipeline

import (
	"context"
	"testing"

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
