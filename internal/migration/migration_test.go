package migration_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"ariga.io/atlas/sql/migrate"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/schema"
)

// dsn is the DSN the client opens its database with.
func dsn(path string) string {
	return "file:" + path + "?_txlock=immediate&_busy_timeout=5000&_foreign_keys=on&_journal_mode=WAL"
}

// mustOpen opens a new, empty database file in a temporary directory.
func mustOpen(tb testing.TB) *sql.DB {
	tb.Helper()
	conn, err := sql.Open(sqlitedriver.Name, dsn(filepath.Join(tb.TempDir(), "client.db")))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, conn.Close()) })
	require.NoError(tb, conn.Ping())
	return conn
}

// state is everything a migration could change: user_version, and
// through tabledump the schema in sqlite_master and the rows of every
// table (schema_revision included).
type state struct {
	UserVersion int
	Tables      map[string][]string
}

// dump returns the state of conn.
func dump(tb testing.TB, conn *sql.DB) state {
	tb.Helper()
	return state{UserVersion: userVersion(tb, conn), Tables: tabledump.Tables(tb, conn)}
}

type revisionRow struct {
	Version        string
	Type           int
	Applied, Total int
	Error          string
}

func revisions(tb testing.TB, conn *sql.DB) []revisionRow {
	tb.Helper()
	rows, err := conn.Query(`SELECT version, type, applied, total, error FROM schema_revision ORDER BY CAST(version AS INTEGER)`)
	require.NoError(tb, err)
	defer rows.Close()
	var out []revisionRow
	for rows.Next() {
		var r revisionRow
		require.NoError(tb, rows.Scan(&r.Version, &r.Type, &r.Applied, &r.Total, &r.Error))
		out = append(out, r)
	}
	require.NoError(tb, rows.Err())
	return out
}

func userVersion(tb testing.TB, conn *sql.DB) int {
	tb.Helper()
	var v int
	require.NoError(tb, conn.QueryRow("PRAGMA user_version").Scan(&v))
	return v
}

func indexColumns(tb testing.TB, conn *sql.DB, index string) []string {
	tb.Helper()
	return migrationtest.Strings(tb, conn, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, index)
}

// requireHeadSchema checks that conn is at the head's user_version and
// has the schema of a new database migrated to head.
func requireHeadSchema(tb testing.TB, conn *sql.DB) {
	tb.Helper()
	require.Equal(tb, migrationtest.HeadNumber(tb), userVersion(tb, conn))
	require.Equal(tb, schemaOf(tb, atHead(tb)), schemaOf(tb, conn))
}

// requireIndex15 checks that conn has version 15's index on its columns.
func requireIndex15(tb testing.TB, conn *sql.DB) {
	tb.Helper()
	require.Equal(tb,
		[]string{"recipient_user_id", "recipient_device_id", "sequence"},
		indexColumns(tb, conn, "pending_outbound_message_recipient"))
}

// schemaOf returns conn's schema objects (type, name, table, SQL).
func schemaOf(tb testing.TB, conn *sql.DB) []string {
	tb.Helper()
	return migrationtest.Strings(tb, conn, `SELECT type || ' ' || name || ' ' || tbl_name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
}

// above returns m's versions above v, oldest first: what Up applies to a
// database at v.
func above(m *migration.Migrator, v string) []string {
	versions := m.Versions()
	for i, x := range versions {
		if x == v && i+1 < len(versions) {
			return versions[i+1:]
		}
	}
	return nil
}

// requireUpNoop checks that Up on conn, at m's head, applies nothing and
// changes nothing.
func requireUpNoop(tb testing.TB, m *migration.Migrator, conn *sql.DB) {
	tb.Helper()
	before := dump(tb, conn)
	applied, err := m.Up(context.Background(), conn)
	require.NoError(tb, err)
	require.Empty(tb, applied)
	require.Equal(tb, before, dump(tb, conn))
}

// baselineSQL is the frozen version 14 file, applied by hand to build a
// database as version-14 code left it.
var baselineSQL = migrationtest.BaselineSQL

// openV14 builds a version-14 database the way version-14 code did: the
// baseline schema, PRAGMA user_version = 14, no schema_revision, and rows.
func openV14(tb testing.TB) *sql.DB {
	tb.Helper()
	conn := mustOpen(tb)
	exec(tb, conn, baselineSQL(tb), "PRAGMA user_version = 14",
		`INSERT INTO storage_key VALUES (1, 'active', x'01', 1700000000)`,
		`INSERT INTO local_identity VALUES (1, 'alice', 1, x'02')`,
		`INSERT INTO session VALUES ('bob', 2, x'03')`,
		`INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
		 VALUES ('bob', 2, x'00112233445566778899aabbccddeeff', x'05'),
		        ('carol', 1, x'ffeeddccbbaa99887766554433221100', x'06')`,
		`INSERT INTO processed_inbound_message VALUES ('bob', 2, x'0102030405060708090a0b0c0d0e0f10', 1700000001)`,
	)
	return conn
}

// atHead returns a new database migrated to head by the default migrator.
func atHead(tb testing.TB) *sql.DB {
	tb.Helper()
	conn := mustOpen(tb)
	_, err := mustDefault(tb).Up(context.Background(), conn)
	require.NoError(tb, err)
	return conn
}

// openThen returns a setup that opens a database with open and then runs
// stmts on it.
func openThen(open func(tb testing.TB) *sql.DB, stmts ...string) func(tb testing.TB) *sql.DB {
	return func(tb testing.TB) *sql.DB {
		tb.Helper()
		conn := open(tb)
		exec(tb, conn, stmts...)
		return conn
	}
}

// futureRevision records the version after head, which this code does
// not know, as applied.
func futureRevision(tb testing.TB) string { return migrationtest.FutureRevision(tb) }

// thenExec returns a setup that opens a database with open and then runs
// the statements stmts returns for it.
func thenExec(open func(tb testing.TB) *sql.DB, stmts ...func(tb testing.TB) string) func(tb testing.TB) *sql.DB {
	return func(tb testing.TB) *sql.DB {
		tb.Helper()
		conn := open(tb)
		for _, s := range stmts {
			exec(tb, conn, s(tb))
		}
		return conn
	}
}

// stmt returns a statement as thenExec takes it.
func stmt(s string) func(testing.TB) string { return func(testing.TB) string { return s } }

// userVersionNext sets user_version to the version after head.
func userVersionNext(tb testing.TB) string { return "PRAGMA user_version = " + migrationtest.Next(tb) }

// sumFS returns a directory holding files and an atlas.sum over them.
var sumFS = migrationtest.SumFS

var (
	mustDefault = migrationtest.Default
	exec        = migrationtest.Exec
)

func TestUpFreshDatabase(t *testing.T) {
	ctx := context.Background()
	conn := mustOpen(t)
	m := mustDefault(t)

	applied, err := m.Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, m.Versions(), applied)

	revs := revisions(t, conn)
	require.Len(t, revs, len(m.Versions()))
	// Versions 14 and 15 are landed: their statement counts are facts.
	require.Equal(t, []revisionRow{
		{Version: "14", Type: int(migrate.RevisionTypeExecute), Applied: 8, Total: 8},
		{Version: "15", Type: int(migrate.RevisionTypeExecute), Applied: 1, Total: 1},
	}, revs[:2])
	for i, r := range revs {
		require.Equal(t, m.Versions()[i], r.Version)
		require.Equal(t, int(migrate.RevisionTypeExecute), r.Type, r.Version)
		require.Equal(t, r.Total, r.Applied, r.Version)
		require.Empty(t, r.Error, r.Version)
	}
	require.Equal(t, migrationtest.HeadNumber(t), userVersion(t, conn))

	// Running again is a no-op.
	requireUpNoop(t, m, conn)
}

// TestMigration15 checks what migration 15 does, as a fact of that
// migration: on a version-14 database it adds the per-recipient index on
// pending_outbound_message and nothing else.
func TestMigration15(t *testing.T) {
	ctx := context.Background()
	conn := mustOpen(t)
	_, err := migrationtest.Through(t, "14").Up(ctx, conn)
	require.NoError(t, err)
	before := schemaOf(t, conn)

	applied, err := migrationtest.Through(t, "15").Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, []string{"15"}, applied)
	require.Equal(t, 15, userVersion(t, conn))
	requireIndex15(t, conn)
	var onTable string
	require.NoError(t, conn.QueryRow(
		`SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = 'pending_outbound_message_recipient'`,
	).Scan(&onTable))
	require.Equal(t, "pending_outbound_message", onTable)
	after := schemaOf(t, conn)
	require.Len(t, after, len(before)+1, "one object added")
	require.Subset(t, after, before)
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	head := migrationtest.Head(t)
	require.Equal(t, head, m.Head())
	require.Equal(t, []string{"14", "15"}, m.Versions()[:2], "the landed versions")

	tests := []struct {
		name  string
		setup func(tb testing.TB) *sql.DB
		want  migration.Status
	}{
		{
			name:  "empty file",
			setup: mustOpen,
			want:  migration.Status{Current: "", Pending: m.Versions()},
		},
		{
			name:  "legacy v14 without history",
			setup: openV14,
			want:  migration.Status{Current: "14", Pending: above(m, "14")},
		},
		{
			name:  "head",
			setup: atHead,
			want:  migration.Status{Current: head},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := tt.setup(t)
			before := dump(t, conn)
			st, err := m.Status(ctx, conn)
			require.NoError(t, err)
			require.Equal(t, tt.want, st)
			require.Equal(t, before, dump(t, conn), "Status changed the database")
		})
	}
}

func TestStatusBeforeAndAfterUp(t *testing.T) {
	ctx := context.Background()
	conn := mustOpen(t)
	m := mustDefault(t)

	st, err := m.Status(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, "", st.Current)
	require.Equal(t, m.Versions(), st.Pending)

	_, err = m.Up(ctx, conn)
	require.NoError(t, err)

	st, err = m.Status(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, m.Head(), st.Current)
	require.Empty(t, st.Pending)
}

func TestPlanChangesNothing(t *testing.T) {
	m := mustDefault(t)
	// planOf returns m's plan for conn and checks that planning changed
	// nothing.
	planOf := func(t *testing.T, conn *sql.DB) []migration.PendingFile {
		t.Helper()
		before := dump(t, conn)
		plan, err := m.Plan(context.Background(), conn)
		require.NoError(t, err)
		require.Equal(t, before, dump(t, conn))
		return plan
	}

	t.Run("fresh", func(t *testing.T) {
		conn := mustOpen(t)
		plan := planOf(t, conn)

		require.Len(t, plan, len(m.Versions()))
		for i, p := range plan {
			require.Equal(t, m.Versions()[i], p.Version)
		}
		require.Equal(t, "14", plan[0].Version)
		require.Equal(t, "baseline", plan[0].Description)
		require.Len(t, plan[0].Statements, 8)
		require.Contains(t, plan[0].Statements[0], "CREATE TABLE storage_key")
		require.Equal(t, "15", plan[1].Version)
		require.Len(t, plan[1].Statements, 1)
		require.Contains(t, plan[1].Statements[0], "CREATE INDEX pending_outbound_message_recipient")

		// Nothing was created: sqlite_master is still empty.
		var n int
		require.NoError(t, conn.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&n))
		require.Zero(t, n)
	})

	t.Run("legacy v14", func(t *testing.T) {
		plan := planOf(t, openV14(t))
		var versions []string
		for _, p := range plan {
			versions = append(versions, p.Version)
		}
		require.Equal(t, above(m, "14"), versions)
	})

	t.Run("head", func(t *testing.T) {
		require.Empty(t, planOf(t, atHead(t)))
	})
}

func TestNewRejectsBrokenDirectory(t *testing.T) {
	const (
		one = "CREATE TABLE a (x INTEGER);\n"
		two = "CREATE TABLE b (y INTEGER);\n"
	)
	valid := func(t *testing.T) fstest.MapFS {
		return sumFS(t, map[string]string{"1_a.sql": one, "2_b.sql": two})
	}
	// validWith is the valid directory with name written after hashing.
	validWith := func(name, data string) func(t *testing.T) fstest.MapFS {
		return func(t *testing.T) fstest.MapFS {
			f := valid(t)
			f[name] = &fstest.MapFile{Data: []byte(data)}
			return f
		}
	}
	// validWithout is the valid directory with name removed after hashing.
	validWithout := func(name string) func(t *testing.T) fstest.MapFS {
		return func(t *testing.T) fstest.MapFS {
			f := valid(t)
			delete(f, name)
			return f
		}
	}
	tests := []struct {
		name  string
		fsys  func(t *testing.T) fstest.MapFS
		want  error
		atlas error // the Atlas error wrapped, if any
		// For a mismatch, the file and reason Atlas's ChecksumError names.
		file   string
		reason migrate.Reason
	}{
		{
			name:   "file edited after hashing",
			fsys:   validWith("2_b.sql", "CREATE TABLE b (y INTEGER, z TEXT);\n"),
			want:   schema.ErrChecksum,
			atlas:  migrate.ErrChecksumMismatch,
			file:   "2_b.sql",
			reason: migrate.ReasonEdited,
		},
		{
			name:   "file added without re-hashing",
			fsys:   validWith("3_c.sql", "CREATE TABLE c (z INTEGER);\n"),
			want:   schema.ErrChecksum,
			atlas:  migrate.ErrChecksumMismatch,
			file:   "3_c.sql",
			reason: migrate.ReasonAdded,
		},
		{
			name:   "file removed",
			fsys:   validWithout("2_b.sql"),
			want:   schema.ErrChecksum,
			atlas:  migrate.ErrChecksumMismatch,
			file:   "2_b.sql",
			reason: migrate.ReasonRemoved,
		},
		{
			name:  "atlas.sum missing",
			fsys:  validWithout(migrate.HashFileName),
			want:  schema.ErrChecksum,
			atlas: migrate.ErrChecksumNotFound,
		},
		{
			name: "atlas.sum garbled",
			fsys: validWith(migrate.HashFileName, "not a sum file\n"),
			want: schema.ErrChecksum,
		},
		{
			name: "non-numeric version",
			fsys: func(t *testing.T) fstest.MapFS {
				return sumFS(t, map[string]string{"1_a.sql": one, "second_b.sql": two})
			},
			want: migration.ErrDirectory,
		},
		{
			name: "two files of one version",
			fsys: func(t *testing.T) fstest.MapFS {
				return sumFS(t, map[string]string{"1_a.sql": one, "2_b.sql": two, "2_c.sql": "CREATE TABLE c (z INTEGER);\n"})
			},
			want: migration.ErrDirectory,
		},
		{
			name: "one version spelled twice",
			fsys: func(t *testing.T) fstest.MapFS {
				return sumFS(t, map[string]string{"1_a.sql": one, "2_b.sql": two, "02_c.sql": "CREATE TABLE c (z INTEGER);\n"})
			},
			want: migration.ErrDirectory,
		},
		{
			name: "no migration files",
			fsys: func(t *testing.T) fstest.MapFS {
				return fstest.MapFS{"README": &fstest.MapFile{Data: []byte("empty")}}
			},
			want: migration.ErrDirectory,
		},
		{
			name: "a file the statement scanner cannot split",
			fsys: func(t *testing.T) fstest.MapFS {
				return sumFS(t, map[string]string{"1_a.sql": one, "2_b.sql": "CREATE TABLE b (y INTEGER;\n"})
			},
			want: migration.ErrDirectory,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := mustOpen(t)
			before := dump(t, conn)
			m, err := migration.New(tt.fsys(t), ".")
			require.Error(t, err)
			require.True(t, errors.Is(err, tt.want), "got %v, want %v", err, tt.want)
			if tt.atlas != nil {
				require.True(t, errors.Is(err, tt.atlas), "got %v, want it to wrap %v", err, tt.atlas)
			}
			if tt.file != "" {
				var ce *migrate.ChecksumError
				require.True(t, errors.As(err, &ce), "%v", err)
				require.Equal(t, tt.file, ce.File)
				require.Equal(t, tt.reason, ce.Reason)
			}
			require.Nil(t, m, "no migrator, so nothing can be applied")
			require.Equal(t, before, dump(t, conn))
		})
	}

	t.Run("valid directory is accepted", func(t *testing.T) {
		m, err := migration.New(valid(t), ".")
		require.NoError(t, err)
		require.Equal(t, []string{"1", "2"}, m.Versions())
		require.Equal(t, "2", m.Head())
	})
}

// TestEmbeddedDirectoryMatchesAtlas checks that the directory on disk
// validates with Atlas's own LocalDir, the one `atlas migrate` uses: the
// runner and the Atlas CLI agree on atlas.sum.
func TestEmbeddedDirectoryMatchesAtlas(t *testing.T) {
	dir, err := migrate.NewLocalDir(filepath.Join("..", "..", "schema", "migrations"))
	require.NoError(t, err)
	require.NoError(t, migrate.Validate(dir))
	files, err := dir.Files()
	require.NoError(t, err)
	var versions []string
	for _, f := range files {
		versions = append(versions, f.Version())
	}
	require.Equal(t, mustDefault(t).Versions(), versions)
}

func TestRefusesNewerDatabase(t *testing.T) {
	m := mustDefault(t)
	tests := []struct {
		name  string
		setup func(tb testing.TB) *sql.DB
	}{
		{
			name:  "schema_revision records the version after head",
			setup: thenExec(atHead, futureRevision, stmt(`CREATE TABLE future_table (id INTEGER PRIMARY KEY)`), userVersionNext),
		},
		{
			name:  "schema_revision records the version after head, user_version still head",
			setup: thenExec(atHead, futureRevision),
		},
		{name: "user_version after head at head", setup: thenExec(atHead, userVersionNext)},
		{name: "user_version after head without history", setup: thenExec(openV14, userVersionNext)},
		{name: "user_version after head on an empty file", setup: thenExec(mustOpen, userVersionNext)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireRefused(t, m, tt.setup(t), schema.ErrNewerDatabase)
		})
	}
}

func TestRefusesUnknownState(t *testing.T) {
	m := mustDefault(t)
	tests := []struct {
		name  string
		setup func(tb testing.TB) *sql.DB
	}{
		{
			name: "unrelated tables, no history",
			setup: openThen(mustOpen, `CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)`,
				`INSERT INTO notes (body) VALUES ('keep me')`),
		},
		{
			name: "v14 tables but user_version 0",
			setup: func(tb testing.TB) *sql.DB {
				return openThen(mustOpen, baselineSQL(tb))(tb)
			},
		},
		{
			name: "version-15 tables, user_version 15, no history",
			setup: openThen(openV14, `CREATE INDEX pending_outbound_message_recipient
					ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence)`,
				"PRAGMA user_version = 15"),
		},
		{
			name: "head tables, head's user_version, no history",
			setup: func(tb testing.TB) *sql.DB {
				conn := atHead(tb)
				exec(tb, conn, "DROP TABLE schema_revision")
				return conn
			},
		},
		{
			name:  "empty history table beside unrelated tables",
			setup: openThen(mustOpen, schema.RevisionTable(), `CREATE TABLE notes (id INTEGER PRIMARY KEY)`),
		},
		{
			// Below head, so not newer code's: another branch's history.
			name: "history records version 10, which the directory lacks",
			setup: openThen(atHead, `INSERT INTO schema_revision
					(version, description, type, applied, total, executed_at, execution_time, hash, operator_version)
					VALUES ('10', 'other branch', 2, 1, 1, 0, 0, 'h1:x', 'other')`),
		},
		{
			name: "partly applied version",
			setup: openThen(openV14, schema.RevisionTable(), `INSERT INTO schema_revision
					(version, description, type, applied, total, executed_at, execution_time, hash, operator_version)
					VALUES ('14', 'baseline', 2, 3, 8, 0, 0, 'h1:x', 'older')`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireRefused(t, m, tt.setup(t), schema.ErrUnknownState)
		})
	}
}

// requireRefused checks that Up, Status and Plan each refuse conn with
// want, that Up applies nothing, and that none of them changes conn.
func requireRefused(t *testing.T, m *migration.Migrator, conn *sql.DB, want error) {
	t.Helper()
	ctx := context.Background()
	before := dump(t, conn)

	applied, err := m.Up(ctx, conn)
	require.ErrorIs(t, err, want, "Up")
	require.Empty(t, applied)
	require.Equal(t, before, dump(t, conn), "Up changed the database")

	_, err = m.Status(ctx, conn)
	require.ErrorIs(t, err, want, "Status")
	_, err = m.Plan(ctx, conn)
	require.ErrorIs(t, err, want, "Plan")
	require.Equal(t, before, dump(t, conn), "Status or Plan changed the database")
}

func TestAdoptsLegacyV14(t *testing.T) {
	ctx := context.Background()
	conn := openV14(t)
	m := mustDefault(t)

	tables := []string{
		"storage_key", "local_identity", "identity_pin", "session", "session_initiation",
		"pending_outbound_message", "pending_inbound_message", "processed_inbound_message",
		"sqlite_sequence",
	}
	rowsBefore := map[string][]string{}
	for _, tbl := range tables {
		rowsBefore[tbl] = tabledump.Rows(t, conn, tbl)
	}
	require.Len(t, rowsBefore["pending_outbound_message"], 2)

	// Migration 15, a fact of that migration: adopted at 14, only 15
	// runs, and no row changes.
	applied, err := migrationtest.Through(t, "15").Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, []string{"15"}, applied, "only version 15 runs on a v14 database")
	for _, tbl := range tables {
		require.Equal(t, rowsBefore[tbl], tabledump.Rows(t, conn, tbl), "rows of %s", tbl)
	}
	require.Equal(t, []revisionRow{
		{Version: "14", Type: int(migrate.RevisionTypeBaseline)},
		{Version: "15", Type: int(migrate.RevisionTypeExecute), Applied: 1, Total: 1},
	}, revisions(t, conn))
	requireIndex15(t, conn)

	// Then the rest of the directory, up to head.
	applied, err = m.Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, above(m, "15"), applied)
	require.Len(t, revisions(t, conn), len(m.Versions()))
	requireHeadSchema(t, conn)

	st, err := m.Status(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, migration.Status{Current: m.Head()}, st)

	requireUpNoop(t, m, conn)
}

// TestAdoptsLegacyV14AtHead: Up on a version-14 database without history
// adopts it at 14 and applies exactly every later version in one call.
func TestAdoptsLegacyV14AtHead(t *testing.T) {
	ctx := context.Background()
	conn := openV14(t)
	m := mustDefault(t)
	applied, err := m.Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, above(m, "14"), applied)
	revs := revisions(t, conn)
	require.Equal(t, revisionRow{Version: "14", Type: int(migrate.RevisionTypeBaseline)}, revs[0])
	require.Len(t, revs, len(m.Versions()))
	requireHeadSchema(t, conn)
}

// TestAdoptedAndFreshSchemasMatch compares a v14 database migrated to head
// with a fresh database migrated to head: same tables, same indexes.
func TestAdoptedAndFreshSchemasMatch(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	legacy, fresh := openV14(t), mustOpen(t)
	_, err := m.Up(ctx, legacy)
	require.NoError(t, err)
	_, err = m.Up(ctx, fresh)
	require.NoError(t, err)

	schemaOf := func(conn *sql.DB) []string {
		return migrationtest.Strings(t, conn, `SELECT type || ' ' || name || ' ' || coalesce(sql, '')
			FROM sqlite_master ORDER BY type, name`)
	}
	require.Equal(t, schemaOf(fresh), schemaOf(legacy))
}

func TestFailingMigrationAppliesNothing(t *testing.T) {
	ctx := context.Background()
	fsys := sumFS(t, map[string]string{
		"1_a.sql": "CREATE TABLE a (x INTEGER);\n",
		"2_b.sql": "CREATE TABLE b (y INTEGER);\nTHIS IS NOT SQL;\n",
	})
	m, err := migration.New(fsys, ".")
	require.NoError(t, err, "the directory itself is valid")

	t.Run("fresh database", func(t *testing.T) {
		conn := mustOpen(t)
		before := dump(t, conn)
		applied, err := m.Up(ctx, conn)
		require.Error(t, err)
		require.Contains(t, err.Error(), "THIS IS NOT SQL")
		var stmtErr *migrate.StmtExecError
		require.True(t, errors.As(err, &stmtErr), "%v", err)
		require.Equal(t, "2", stmtErr.Version)
		require.Empty(t, applied)
		// Version 1 ran in the same transaction and was rolled back with it,
		// as were schema_revision and user_version.
		require.Equal(t, before, dump(t, conn))

		st, err := m.Status(ctx, conn)
		require.NoError(t, err)
		require.Equal(t, migration.Status{Pending: []string{"1", "2"}}, st)
	})

	t.Run("database at version 1", func(t *testing.T) {
		conn := mustOpen(t)
		first, err := migration.New(sumFS(t, map[string]string{"1_a.sql": "CREATE TABLE a (x INTEGER);\n"}), ".")
		require.NoError(t, err)
		_, err = first.Up(ctx, conn)
		require.NoError(t, err)
		exec(t, conn, `INSERT INTO a VALUES (42)`)

		before := dump(t, conn)
		_, err = m.Up(ctx, conn)
		require.Error(t, err)
		require.Equal(t, before, dump(t, conn))
		st, err := m.Status(ctx, conn)
		require.NoError(t, err)
		require.Equal(t, migration.Status{Current: "1", Pending: []string{"2"}}, st)
	})
}

// An error of Up while it applies a file says its context once: which
// statement failed, or which revision could not be written, then
// SQLite's message as the build's driver words it (with or without the
// code's name and number), and nothing of the context again.
func TestUpErrorsSayTheirContextOnce(t *testing.T) {
	ctx := context.Background()
	first, err := migration.New(sumFS(t, map[string]string{"1_a.sql": "CREATE TABLE a (x INTEGER);\n"}), ".")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		second string
		setup  []string
		want   string // the context
		sqlite string // SQLite's message, within the driver's wording
	}{
		{
			name:   "a statement fails",
			second: "CREATE TABLE b (y INTEGER);\nTHIS IS NOT SQL;\n",
			want:   `migration: apply: sql/migrate: executing statement "THIS IS NOT SQL;" from version "2"`,
			sqlite: `near "THIS": syntax error`,
		},
		{
			name:   "the revision is not written",
			second: "CREATE TABLE b (y INTEGER);\n",
			// A trigger a writer of the file could plant refuses the row.
			setup:  []string{"CREATE TRIGGER refuse_revision BEFORE INSERT ON schema_revision BEGIN SELECT RAISE(ABORT, 'refused'); END"},
			want:   "migration: write revision 2",
			sqlite: "refused",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := migration.New(sumFS(t, map[string]string{"1_a.sql": "CREATE TABLE a (x INTEGER);\n", "2_b.sql": tc.second}), ".")
			require.NoError(t, err)
			conn := mustOpen(t)
			_, err = first.Up(ctx, conn)
			require.NoError(t, err)
			exec(t, conn, tc.setup...)
			_, err = m.Up(ctx, conn)
			require.Error(t, err)
			rest, ok := strings.CutPrefix(err.Error(), tc.want+": ")
			require.True(t, ok, "%q starts with %q", err, tc.want)
			require.Contains(t, rest, tc.sqlite)
			for _, word := range []string{"migration", "migrate", "revision", "version", "THIS IS"} {
				require.NotContains(t, rest, word, "the context is said once")
			}
		})
	}
}

// TestConcurrentUp runs Up from several connections pools at once on one
// file: SQLite serialises them, exactly one applies the versions.
func TestConcurrentUp(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	path := filepath.Join(t.TempDir(), "client.db")
	// The file is made, in WAL mode, before the pools race: the test is
	// of concurrent Up, not of four connections creating one file, whose
	// switch to WAL can answer SQLITE_BUSY without waiting.
	first, err := sql.Open(sqlitedriver.Name, dsn(path))
	require.NoError(t, err)
	require.NoError(t, first.PingContext(ctx))
	require.NoError(t, first.Close())

	const n = 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied [][]string
		errs    []error
	)
	for range n {
		conn, err := sql.Open(sqlitedriver.Name, dsn(path))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		wg.Go(func() {
			got, err := m.Up(ctx, conn)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			applied = append(applied, got)
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	var ran int
	for _, a := range applied {
		if len(a) > 0 {
			ran++
			require.Equal(t, m.Versions(), a)
		}
	}
	require.Equal(t, 1, ran, "%v", applied)

	conn, err := sql.Open(sqlitedriver.Name, dsn(path))
	require.NoError(t, err)
	defer conn.Close()
	require.Len(t, revisions(t, conn), len(m.Versions()))
}

// Linking package migration, as every application does through
// sqlitestore.Open, registers no database/sql driver: the only one is
// the build's SQLite driver's own (sqlitedriver.Name), which this test
// imports. A tooling
// driver registered at init would show up here.
func TestRegistersNoDriver(t *testing.T) {
	require.Equal(t, []string{sqlitedriver.Name}, sql.Drivers())
}

// A migration file added below the database's version (13_late.sql, under
// the landed versions, rehashed) is never run on an existing database
// while a new one gets it: Status names it, Up and Plan refuse it naming
// the file, and nothing changes. A new database gets every file.
func TestOutOfOrderMigration(t *testing.T) {
	ctx := context.Background()
	m, err := migration.New(migrationtest.WithMigrations(t, migrationtest.LateMigration), ".")
	require.NoError(t, err)
	require.Equal(t, append([]string{"13"}, mustDefault(t).Versions()...), m.Versions())
	head := m.Head()
	// at14 has the history of version 14 only.
	at14 := func(tb testing.TB) *sql.DB {
		tb.Helper()
		conn := mustOpen(tb)
		first, err := migration.New(migrationtest.SumFS(tb, map[string]string{"14_baseline.sql": baselineSQL(tb)}), ".")
		require.NoError(tb, err)
		_, err = first.Up(ctx, conn)
		require.NoError(tb, err)
		return conn
	}
	tests := []struct {
		name    string
		setup   func(tb testing.TB) *sql.DB
		current string
		pending []string
	}{
		{name: "at head", setup: atHead, current: head},
		{name: "at 14", setup: at14, current: "14", pending: above(m, "14")},
		{name: "legacy v14 without history", setup: openV14, current: "14", pending: above(m, "14")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := tt.setup(t)
			before := dump(t, conn)

			st, err := m.Status(ctx, conn)
			require.NoError(t, err)
			require.Equal(t, migration.Status{Current: tt.current, Pending: tt.pending, OutOfOrder: []string{"13_late.sql"}}, st)

			applied, err := m.Up(ctx, conn)
			require.ErrorIs(t, err, schema.ErrOutOfOrder)
			require.ErrorContains(t, err, "13_late.sql at or below version "+tt.current)
			require.Empty(t, applied)
			_, err = m.Plan(ctx, conn)
			require.ErrorIs(t, err, schema.ErrOutOfOrder)
			require.Equal(t, before, dump(t, conn), "nothing changed")
		})
	}
	t.Run("new database", func(t *testing.T) {
		conn := mustOpen(t)
		applied, err := m.Up(ctx, conn)
		require.NoError(t, err)
		require.Equal(t, m.Versions(), applied)
		st, err := m.Status(ctx, conn)
		require.NoError(t, err)
		require.Equal(t, migration.Status{Current: head}, st)
	})
}

// TestThrough: Through stops the directory at a version, keeps every
// file's history hash, and refuses a version the directory lacks.
func TestThrough(t *testing.T) {
	m := mustDefault(t)
	for i, v := range m.Versions() {
		through, err := m.Through(v)
		require.NoError(t, err)
		require.Equal(t, m.Versions()[:i+1], through.Versions())
		require.Equal(t, v, through.Head())
	}
	for _, v := range []string{"13", migrationtest.Next(t), "x"} {
		_, err := m.Through(v)
		require.ErrorIs(t, err, migration.ErrDirectory, v)
	}

	// A database migrated through 14 and then by m has the history of
	// one migrated by m alone.
	ctx := context.Background()
	stepwise, whole := mustOpen(t), mustOpen(t)
	first, err := m.Through("14")
	require.NoError(t, err)
	_, err = first.Up(ctx, stepwise)
	require.NoError(t, err)
	_, err = m.Up(ctx, stepwise)
	require.NoError(t, err)
	_, err = m.Up(ctx, whole)
	require.NoError(t, err)
	hashes := func(conn *sql.DB) []string {
		return migrationtest.Strings(t, conn, `SELECT version || ' ' || hash FROM schema_revision ORDER BY CAST(version AS INTEGER)`)
	}
	require.Equal(t, hashes(whole), hashes(stepwise))
	require.Len(t, hashes(whole), len(m.Versions()))
}

// A version the file records that the directory lacks is named escaped:
// its text reaches terminals and CI logs through the error, so a newline
// or a terminal escape in it is written as a Go escape, never raw.
func TestRecordedVersionIsEscaped(t *testing.T) {
	m := mustDefault(t)
	for _, version := range []string{"1\x1b[2J\n::error file=x::forged", migrationtest.Next(t) + "\n::error::forged"} {
		t.Run(fmt.Sprintf("%q", version), func(t *testing.T) {
			conn := atHead(t)
			_, err := conn.Exec(`INSERT INTO schema_revision
	(version, description, type, applied, total, executed_at, execution_time, hash, operator_version)
	VALUES (?, 'planted', 2, 1, 1, 0, 0, 'h1:x', 'x')`, version)
			require.NoError(t, err)
			_, err = m.Status(context.Background(), conn)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "\n")
			require.NotContains(t, err.Error(), "\x1b")
			require.Contains(t, err.Error(), `\n::error`)
		})
	}
}
