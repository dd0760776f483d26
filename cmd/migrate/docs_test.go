package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/db/legacydb"
	"github.com/securemsg/storage/internal/migration"
)

var repo = filepath.Join("..", "..")

// TestGeneratedDocsCurrent regenerates queries/PLANS.md and
// schema/SCHEMA.md and compares them with the committed files, as CI
// does: a query, plan or schema change must come with its regenerated
// file.
func TestGeneratedDocsCurrent(t *testing.T) {
	ctx := context.Background()
	m, err := migration.Default()
	require.NoError(t, err)
	for _, tt := range []struct {
		path string
		gen  func() ([]byte, error)
	}{
		{plansPath, func() ([]byte, error) { return pipeline.PlansDoc(ctx, m, repo) }},
		{schemaDocPath, func() ([]byte, error) { return pipeline.SchemaDoc(ctx, m) }},
	} {
		t.Run(tt.path, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(repo, tt.path))
			require.NoError(t, err)
			got, err := tt.gen()
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "%s is stale: run 'go -C cmd run ./migrate %s'", tt.path,
				map[string]string{plansPath: "plans", schemaDocPath: "schema-doc"}[tt.path])
		})
	}
}

// TestPlansListEveryQuery checks that plans finds every method sqlc
// generated, in both packages, and plans each one.
func TestPlansListEveryQuery(t *testing.T) {
	for _, tt := range []struct {
		dir, queries string
		generated    reflect.Type // sqlc's Queries: a method per query, and WithTx
	}{
		{"internal/db", "queries", reflect.TypeFor[*db.Queries]()},
		{"internal/db/legacydb", "queries/legacy", reflect.TypeFor[*legacydb.Queries]()},
	} {
		qs, err := pipeline.ReadQueries(filepath.Join(repo, tt.dir), tt.queries)
		require.NoError(t, err)
		var got, want []string
		for _, q := range qs {
			got = append(got, q.Name)
			require.NotEmpty(t, q.SQL, q.Name)
			require.True(t, strings.HasPrefix(q.Kind, ":"), q.Kind)
		}
		for i := 0; i < tt.generated.NumMethod(); i++ {
			if name := tt.generated.Method(i).Name; name != "WithTx" {
				want = append(want, name)
			}
		}
		slices.Sort(got)
		require.Equal(t, want, got, tt.dir)
	}

	doc, err := os.ReadFile(filepath.Join(repo, plansPath))
	require.NoError(t, err)
	for _, name := range []string{"PagePendingOutboundForRecipient", "LegacyPendingBatch", "PendingOutboundColumns"} {
		require.Contains(t, string(doc), "\n### "+name+"\n")
	}
	// The planning database is head with its real indexes and statistics.
	require.Contains(t, string(doc), "SEARCH pending_outbound_message USING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id=? AND sequence>?)")
	// SQLite's own table function is planned, not a table of that name.
	require.Contains(t, string(doc), "SCAN pragma_table_info VIRTUAL TABLE INDEX")
}

func TestReadQueriesEmptyDirectory(t *testing.T) {
	_, err := pipeline.ReadQueries(t.TempDir(), "queries")
	require.ErrorContains(t, err, "no sqlc output")
}

func TestSchemaDocWritesOnlyWhenChanged(t *testing.T) {
	out := filepath.Join(t.TempDir(), "SCHEMA.md")
	code, stdout, stderr := runCmd(t, "schema-doc", "-out", out)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "wrote "+out+"\n", stdout)
	want, err := os.ReadFile(filepath.Join(repo, schemaDocPath))
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	code, stdout, _ = runCmd(t, "schema-doc", "-out", out)
	require.Equal(t, 0, code)
	require.Equal(t, out+" is up to date\n", stdout)
}

func TestRepoRootFromSubdirectory(t *testing.T) {
	root, err := repoRoot()
	require.NoError(t, err)
	abs, err := filepath.Abs(repo)
	require.NoError(t, err)
	require.Equal(t, abs, root)

	t.Chdir(t.TempDir())
	_, err = repoRoot()
	require.ErrorIs(t, err, errNotInRepo)
	code, _, stderr := runCmd(t, "plans")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "not inside a checkout of github.com/securemsg/storage")
}
