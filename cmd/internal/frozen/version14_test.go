package frozen

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/seal"
)

// The proof of the version-14 fixture, an ordinary frozen fixture whose
// record of its contents is expected.json.

func TestFixtureKey(t *testing.T) {
	exp, err := parseExpected(version14.Files())
	require.NoError(t, err)
	assert.Equal(t, exp.KeyID, fixturekit.Key().ID())
	secret := make([]byte, seal.KeySize)
	for i := range secret {
		secret[i] = byte(i)
	}
	k, err := seal.NewKey(secret)
	require.NoError(t, err)
	assert.Equal(t, k.Bytes(), fixturekit.Key().Bytes(), "the key is secret = 0x00..0x1f")
}

func TestProve(t *testing.T) {
	var out bytes.Buffer
	_, err := prove(context.Background(), defaultMigrator(t), version14.Files(), "14", &out)
	require.NoError(t, err, out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 10)
	for _, l := range lines {
		assert.True(t, strings.HasPrefix(l, "ok   "), l)
	}
	for _, want := range []string{"no row lost", "keeps its value", "Atlas diff", "opens with the fixture key", "high-water"} {
		assert.Contains(t, out.String(), want)
	}
	t.Log("\n" + out.String())
}

// v14Tables lists the version-14 tables, every one of which holds rows
// in the fixture.
var v14Tables = []string{
	"storage_key",
	"local_identity",
	"identity_pin",
	"session",
	"session_initiation",
	"pending_outbound_message",
	"pending_inbound_message",
	"processed_inbound_message",
}

func defaultMigrator(t *testing.T) *migration.Migrator {
	t.Helper()
	m, err := migration.Default()
	require.NoError(t, err)
	return m
}

// migrated loads the fixture, dumps it, migrates it to head and returns
// the path, the open connection, both dumps and the applied versions.
func migrated(t *testing.T) (string, *sql.DB, *Database, *Database, []string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client-v14.db")
	require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
	conn := fixturekit.OpenRW(path)
	t.Cleanup(func() { conn.Close() })
	before, err := Dump(ctx, conn)
	require.NoError(t, err)
	m := defaultMigrator(t)
	applied, err := m.Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, versionsAbove(m, "14"), applied, "baseline 14 adopted, every later version applied")
	require.Equal(t, "15", applied[0])
	after, err := Dump(ctx, conn)
	require.NoError(t, err)
	return path, conn, before, after, applied
}

func TestFixtureProperties(t *testing.T) {
	ctx := context.Background()
	exp, err := parseExpected(version14.Files())
	require.NoError(t, err)
	path, conn, before, after, applied := migrated(t)
	m := defaultMigrator(t)

	t.Run("fixture complete", func(t *testing.T) {
		require.NoError(t, checkExpectedComplete(before, exp))
		for _, table := range v14Tables {
			assert.NotEmpty(t, before.Rows[table], table)
		}
		assert.Len(t, before.Rows["pending_outbound_message"], 12)
		assert.Equal(t, int64(14), before.Sequence["pending_outbound_message"])
		assert.Equal(t, int64(13), exp.PendingOutbound[len(exp.PendingOutbound)-1].Sequence)
		recipients := map[[2]any]bool{}
		for _, p := range exp.PendingOutbound {
			recipients[[2]any{p.RecipientUserID, p.RecipientDeviceID}] = true
		}
		assert.GreaterOrEqual(t, len(recipients), 3)
	})
	t.Run("rows kept", func(t *testing.T) {
		none := &expectation{}
		require.NoError(t, checkRowsKept(before, after, none, "14"))
		require.NoError(t, checkValuesKept(before, after, none, "14"))
		require.NoError(t, checkHistoryGrows(before, after, applied))
	})
	t.Run("rows byte-identical through migration 15", func(t *testing.T) {
		// Migration 15 only adds an index: a fact of that migration.
		path15 := filepath.Join(t.TempDir(), "client-v15.db")
		require.NoError(t, fixturekit.Load(ctx, path15, version14.FixtureSQL()))
		conn15 := fixturekit.OpenRW(path15)
		defer conn15.Close()
		applied15, err := migrationtest.Through(t, "15").Up(ctx, conn15)
		require.NoError(t, err)
		require.Equal(t, []string{"15"}, applied15)
		after15, err := Dump(ctx, conn15)
		require.NoError(t, err)
		for _, table := range before.Tables {
			if table != "schema_revision" {
				assert.Equal(t, before.Rows[table], after15.Rows[table], table)
			}
		}
	})
	t.Run("sqlite_sequence kept", func(t *testing.T) {
		require.NoError(t, sameSequence(before, after))
		assert.Equal(t, map[string]int64{"pending_outbound_message": 14, "pending_inbound_message": 4}, after.Sequence)
	})
	t.Run("schema equals fresh head", func(t *testing.T) {
		require.NoError(t, checkNoDrift(ctx, m, conn))
	})
	require.NoError(t, conn.Close())
	t.Run("pending rows open", func(t *testing.T) {
		require.NoError(t, checkPendingOpen(ctx, m, path, exp))
	})
	t.Run("other sealed values open", func(t *testing.T) {
		require.NoError(t, checkStateOpens(ctx, m, path, exp))
	})
	t.Run("next sequence above high-water", func(t *testing.T) {
		require.NoError(t, checkNextSequence(ctx, m, path, 14))
		// The insert above took 15; the mark moved with it.
		require.Error(t, checkNextSequence(ctx, m, path, 14))
		require.NoError(t, checkNextSequence(ctx, m, path, 15))
	})
}

// The checks must be able to fail: each is fed a database with the defect
// it looks for.
func TestFixtureChecksDetectDefects(t *testing.T) {
	ctx := context.Background()
	exp, err := parseExpected(version14.Files())
	require.NoError(t, err)
	m := defaultMigrator(t)

	t.Run("changed row", func(t *testing.T) {
		_, conn, before, _, _ := migrated(t)
		_, err := conn.Exec("UPDATE pending_outbound_message SET sealed = sealed || X'00' WHERE sequence = 7")
		require.NoError(t, err)
		after, err := Dump(ctx, conn)
		require.NoError(t, err)
		require.ErrorContains(t, checkValuesKept(before, after, &expectation{}, "14"), "table pending_outbound_message, row (sequence=7), column sealed: changed from X'")
	})
	t.Run("reset sequence", func(t *testing.T) {
		_, conn, before, _, _ := migrated(t)
		_, err := conn.Exec("UPDATE sqlite_sequence SET seq = 13 WHERE name = 'pending_outbound_message'")
		require.NoError(t, err)
		after, err := Dump(ctx, conn)
		require.NoError(t, err)
		require.Error(t, sameSequence(before, after))
	})
	t.Run("wrong index", func(t *testing.T) {
		_, conn, _, _, _ := migrated(t)
		_, err := conn.Exec("DROP INDEX pending_outbound_message_recipient")
		require.NoError(t, err)
		require.ErrorContains(t, checkNoDrift(ctx, m, conn), "schema differences")
		_, err = conn.Exec("CREATE INDEX pending_outbound_message_recipient ON pending_outbound_message (recipient_user_id, recipient_device_id)")
		require.NoError(t, err)
		require.ErrorContains(t, checkNoDrift(ctx, m, conn), "schema differences")
	})
	t.Run("schema drift", func(t *testing.T) {
		_, conn, _, _, _ := migrated(t)
		_, err := conn.Exec("ALTER TABLE session ADD COLUMN note TEXT")
		require.NoError(t, err)
		require.ErrorContains(t, checkNoDrift(ctx, m, conn), "schema differences")
	})
	t.Run("history drift", func(t *testing.T) {
		_, conn, _, _, _ := migrated(t)
		_, err := conn.Exec("UPDATE schema_revision SET hash = 'h1:edited' WHERE version = '15'")
		require.NoError(t, err)
		require.ErrorContains(t, checkNoDrift(ctx, m, conn), "1 history differences")
	})
	t.Run("unique constraint drift", func(t *testing.T) {
		_, conn, _, _, _ := migrated(t)
		// Rebuild pending_inbound_message without its UNIQUE constraint.
		_, err := conn.Exec(`
			CREATE TABLE x (
			  sequence         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
			  sender_user_id   TEXT    NOT NULL,
			  sender_device_id INTEGER NOT NULL CHECK (sender_device_id >= 0),
			  logical_id       BLOB    NOT NULL CHECK (length(logical_id) = 16),
			  sealed           BLOB    NOT NULL);
			INSERT INTO x SELECT * FROM pending_inbound_message;
			DROP TABLE pending_inbound_message;
			ALTER TABLE x RENAME TO pending_inbound_message;`)
		require.NoError(t, err)
		require.ErrorContains(t, checkNoDrift(ctx, m, conn), "schema differences")
	})
	t.Run("tampered sealed row", func(t *testing.T) {
		path, conn, _, _, _ := migrated(t)
		// Move one message's sealed value into another row: its AD differs.
		_, err := conn.Exec("UPDATE pending_outbound_message SET sealed = (SELECT sealed FROM pending_outbound_message WHERE sequence = 1) WHERE sequence = 2")
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		require.ErrorIs(t, checkPendingOpen(ctx, m, path, exp), seal.ErrAuthentication)
	})
	t.Run("load refuses a non-empty file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		require.NoError(t, os.WriteFile(path, []byte("not empty"), 0o600))
		require.ErrorIs(t, fixturekit.Load(ctx, path, version14.FixtureSQL()), fixturekit.ErrNotEmpty)
	})
}

// copyFixture writes the fixture's files into a new temporary directory,
// each passed through edit (nil: unchanged; a nil result: left out).
func copyFixture(t *testing.T, edit func(name string, b []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{FixtureFile, ExpectedFile} {
		b, err := fs.ReadFile(version14.Files(), name)
		require.NoError(t, err)
		if edit != nil {
			if b = edit(name, b); b == nil {
				continue
			}
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	return dir
}

func TestProveChecks(t *testing.T) {
	ctx := context.Background()
	m := defaultMigrator(t)
	checks, err := prove(ctx, m, version14.Files(), "14", io.Discard)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(checks), 10)
	var out bytes.Buffer
	_, err = prove(ctx, m, version14.Files(), "14", &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, len(checks), "Prove prints one line per check")
	for i, c := range checks {
		assert.True(t, c.OK, c.Name)
		assert.Empty(t, c.Error, c.Name)
		assert.Equal(t, "ok   "+c.Name, lines[i])
	}
	// A pristine copy on disk proves exactly as the embedded one.
	onDisk, err := prove(ctx, m, os.DirFS(copyFixture(t, nil)), "14", io.Discard)
	require.NoError(t, err)
	require.Equal(t, checks, onDisk)
}

// A broken copy of the fixture fails the check that looks for the defect,
// with the defect in its detail, and the checks before it still pass.
func TestProveFSReportsFailures(t *testing.T) {
	ctx := context.Background()
	m := defaultMigrator(t)
	pristine, err := prove(ctx, m, version14.Files(), "14", io.Discard)
	require.NoError(t, err)
	tests := []struct {
		name   string
		edit   func(name string, b []byte) []byte
		failed string // the failing check
		detail string // in its detail
		ran    int    // checks reported in all
	}{
		{
			name: "expected.json missing",
			edit: func(name string, b []byte) []byte {
				if name == "expected.json" {
					return nil
				}
				return b
			},
			// Neither record of the contents: the proof names the one
			// Freeze writes.
			failed: "contents.json parses",
			detail: "contents.json: no such file or directory (and no expected.json)",
			ran:    1,
		},
		{
			name: "a plaintext in expected.json",
			edit: func(name string, b []byte) []byte {
				if name != "expected.json" {
					return b
				}
				return bytes.Replace(b, []byte("fixture message 1 "), []byte("fixture message X "), 1)
			},
			failed: "every pending row opens with the fixture key to its plaintext; count and cursor order unchanged (pages of 5)",
			detail: `plaintext "fixture message 1 `,
			ran:    len(pristine),
		},
		{
			name: "fixture.sql that is not SQL",
			edit: func(name string, b []byte) []byte {
				if name != "fixture.sql" {
					return b
				}
				return append([]byte("NOT SQL;\n"), b...)
			},
			failed: "fixture.sql loads as a version-14 database",
			detail: "syntax error",
			ran:    2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyFixture(t, tt.edit)
			var out bytes.Buffer
			checks, err := prove(ctx, m, os.DirFS(dir), "14", &out)
			require.ErrorContains(t, err, "1 of "+strconv.Itoa(tt.ran)+" checks failed")
			require.Len(t, checks, tt.ran)
			var failed []Check
			for i, c := range checks {
				if c.Name != tt.failed {
					require.Equal(t, pristine[i].Name, c.Name, "the same checks, in the same order")
				}
				if !c.OK {
					failed = append(failed, c)
				}
			}
			require.Len(t, failed, 1, "only the check for the defect fails: %v", checks)
			require.Equal(t, tt.failed, failed[0].Name)
			require.Contains(t, failed[0].Error, tt.detail)
			require.Contains(t, out.String(), "FAIL "+tt.failed+": "+failed[0].Error+"\n")
		})
	}
}

// TestLoadPathWithURISyntax loads the fixture into a path holding what a
// SQLite URI would read as a query or fragment: the database is the file
// at that path, and nothing else appears beside its directory.
func TestLoadPathWithURISyntax(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "odd?mode=memory#x%41")
	require.NoError(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "client-v14.db")
	require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
	names := func(d string) []string {
		es, err := os.ReadDir(d)
		require.NoError(t, err)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	require.Equal(t, []string{"odd?mode=memory#x%41"}, names(parent), "nothing created outside the directory")
	require.Equal(t, []string{"client-v14.db"}, names(dir))
	conn := fixturekit.OpenRW(path)
	defer conn.Close()
	snap, err := Dump(ctx, conn)
	require.NoError(t, err)
	exp, err := parseExpected(version14.Files())
	require.NoError(t, err)
	require.NoError(t, checkExpectedComplete(snap, exp), "the loaded file is the fixture")
}

// TestProveFSIsConfined proves copies of the fixture whose fixture.sql
// reaches for another database file: ATTACH (also after ending the load's
// transaction itself) and VACUUM INTO. The load check fails, no file
// appears and the other database keeps its table and row.
func TestProveFSIsConfined(t *testing.T) {
	ctx := context.Background()
	for name, prefix := range map[string]func(dir, victim string) string{
		"ATTACH and DROP": func(_, victim string) string {
			return "ATTACH DATABASE '" + victim + "' AS v; DROP TABLE v.peers;\n"
		},
		"ATTACH and DROP after COMMIT": func(_, victim string) string {
			return "COMMIT; ATTACH DATABASE '" + victim + "' AS v; DROP TABLE v.peers; DETACH DATABASE v; BEGIN;\n"
		},
		"VACUUM INTO after COMMIT": func(dir, _ string) string {
			return "COMMIT; VACUUM INTO '" + filepath.Join(dir, "copy.db") + "'; BEGIN;\n"
		},
	} {
		t.Run(name, func(t *testing.T) {
			victim := migrationtest.Victim(t)
			dir := filepath.Dir(victim)

			fixture := copyFixture(t, func(name string, b []byte) []byte {
				if name != "fixture.sql" {
					return b
				}
				return append([]byte(prefix(dir, victim)), b...)
			})
			checks, err := prove(ctx, defaultMigrator(t), os.DirFS(fixture), "14", io.Discard)
			require.Error(t, err)
			require.Len(t, checks, 2)
			require.Equal(t, "fixture.sql loads as a version-14 database", checks[1].Name)
			require.False(t, checks[1].OK)
			require.Regexp(t, "not authorized|authorization denied", checks[1].Error)

			migrationtest.RequireVictimUntouched(t, victim)
		})
	}
}
