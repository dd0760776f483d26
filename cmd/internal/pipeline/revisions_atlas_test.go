package pipeline_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/sqlite"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/schema"
)

// atlasRevisions is Atlas's revision store over schema_revision: what
// package migration wrote through Atlas's executor, kept here as the
// reference its own applier is held to.
type atlasRevisions struct{ q *db.Queries }

func (r atlasRevisions) Ident() *migrate.TableIdent {
	return &migrate.TableIdent{Name: "schema_revision"}
}

func (r atlasRevisions) ReadRevisions(ctx context.Context) ([]*migrate.Revision, error) {
	rows, err := r.q.ListRevisions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*migrate.Revision, 0, len(rows))
	for _, row := range rows {
		out = append(out, toAtlasRevision(row))
	}
	return out, nil
}

func (r atlasRevisions) ReadRevision(ctx context.Context, version string) (*migrate.Revision, error) {
	row, err := r.q.GetRevision(ctx, version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, migrate.ErrRevisionNotExist
	}
	if err != nil {
		return nil, err
	}
	return toAtlasRevision(row), nil
}

func (r atlasRevisions) WriteRevision(ctx context.Context, rev *migrate.Revision) error {
	return r.q.UpsertRevision(ctx, db.UpsertRevisionParams{
		Version:         rev.Version,
		Description:     rev.Description,
		Type:            int64(rev.Type),
		Applied:         int64(rev.Applied),
		Total:           int64(rev.Total),
		ExecutedAt:      rev.ExecutedAt.UnixNano(),
		ExecutionTime:   int64(rev.ExecutionTime),
		Error:           rev.Error,
		ErrorStmt:       rev.ErrorStmt,
		Hash:            rev.Hash,
		PartialHashes:   strings.Join(rev.PartialHashes, ","),
		OperatorVersion: rev.OperatorVersion,
	})
}

func (r atlasRevisions) DeleteRevision(ctx context.Context, version string) error {
	return r.q.DeleteRevision(ctx, version)
}

func toAtlasRevision(row db.SchemaRevision) *migrate.Revision {
	var partial []string
	if row.PartialHashes != "" {
		partial = strings.Split(row.PartialHashes, ",")
	}
	return &migrate.Revision{
		Version: row.Version, Description: row.Description, Type: migrate.RevisionType(row.Type),
		Applied: int(row.Applied), Total: int(row.Total),
		ExecutedAt: time.Unix(0, row.ExecutedAt), ExecutionTime: time.Duration(row.ExecutionTime),
		Error: row.Error, ErrorStmt: row.ErrorStmt, Hash: row.Hash, PartialHashes: partial,
		OperatorVersion: row.OperatorVersion,
	}
}

// atlasUp migrates conn with Atlas's own executor and SQLite driver, in one
// transaction, with the operator version package migration records, and
// with version 14 as the baseline when baseline is set.
func atlasUp(t *testing.T, conn *sql.DB, dir migrate.Dir, baseline bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck
	_, err = tx.ExecContext(ctx, schema.RevisionTable())
	require.NoError(t, err)
	drv, err := sqlite.Open(tx)
	require.NoError(t, err)
	opts := []migrate.ExecutorOption{migrate.WithOperatorVersion("securemsg-storage")}
	if baseline {
		opts = append(opts, migrate.WithBaselineVersion("14"))
	}
	ex, err := migrate.NewExecutor(drv, dir, atlasRevisions{q: db.New(tx)}, opts...)
	require.NoError(t, err)
	require.NoError(t, ex.ExecuteN(ctx, 0))
	require.NoError(t, tx.Commit())
}

// TestAppliedRevisionsMatchAtlas holds package migration's applier to
// Atlas's executor: on a new file and on a version-14 file adopted as the
// baseline, every column of every schema_revision row is what the
// executor writes (the same schema too), except the two clocks, which are
// checked for their unit: executed_at in Unix nanoseconds within the run,
// execution_time a duration in nanoseconds no longer than the run.
func TestAppliedRevisionsMatchAtlas(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	v14 := func(t *testing.T, conn *sql.DB) {
		exec(t, conn, migrationtest.BaselineSQL(t), "PRAGMA user_version = 14")
	}
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, conn *sql.DB)
		baseline bool
	}{
		{name: "new file", setup: func(*testing.T, *sql.DB) {}},
		{name: "version 14 adopted as baseline", setup: v14, baseline: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs := openFile(t), openFile(t)
			tc.setup(t, ours)
			tc.setup(t, theirs)

			before := time.Now().UnixNano()
			applied, err := m.Up(ctx, ours)
			require.NoError(t, err)
			require.NotEmpty(t, applied)
			atlasUp(t, theirs, m.Dir(), tc.baseline)
			after := time.Now().UnixNano()

			got, want := revisionRows(t, ours), revisionRows(t, theirs)
			require.Len(t, got, len(want))
			require.Len(t, got, len(m.Versions()), "one row per version")
			for i := range want {
				g, w := got[i], want[i]
				for _, r := range []db.SchemaRevision{g, w} {
					require.GreaterOrEqual(t, r.ExecutedAt, before, "executed_at is Unix nanoseconds")
					require.LessOrEqual(t, r.ExecutedAt, after, "executed_at is Unix nanoseconds")
					require.GreaterOrEqual(t, r.ExecutionTime, int64(0))
					require.LessOrEqual(t, r.ExecutionTime, after-before, "execution_time is nanoseconds")
				}
				g.ExecutedAt, w.ExecutedAt = 0, 0
				g.ExecutionTime, w.ExecutionTime = 0, 0
				require.Equal(t, w, g, "version %s", w.Version)
			}
			require.Equal(t, schemaText(t, theirs), schemaText(t, ours))
			require.Equal(t, m.Head(), strconv.Itoa(userVersion(t, ours)), "user_version mirrors the head")
		})
	}
}

func openFile(t *testing.T) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "client.db")+"?_txlock=immediate&_foreign_keys=on")
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func revisionRows(t *testing.T, conn *sql.DB) []db.SchemaRevision {
	t.Helper()
	rows, err := db.New(conn).ListRevisions(context.Background())
	require.NoError(t, err)
	return rows
}

func schemaText(t *testing.T, conn *sql.DB) []string {
	t.Helper()
	rows, err := conn.Query(`SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

func userVersion(t *testing.T, conn *sql.DB) int {
	t.Helper()
	var v int
	require.NoError(t, conn.QueryRow("PRAGMA user_version").Scan(&v))
	return v
}
