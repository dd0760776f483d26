package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/frozen"
	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/migration"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store/sqlitestore"
)

// copyMigrations copies the embedded migration directory into a new
// temporary directory, adds files, and returns it (atlas.sum not rehashed).
func copyMigrations(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := fs.ReadDir(schema.Migrations, schema.MigrationsDir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := fs.ReadFile(schema.Migrations, schema.MigrationsDir+"/"+e.Name())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir
}

// mustRun runs a command and requires its exit code, returning stdout.
func mustRun(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCmd(t, args...)
	require.Equal(t, want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, stdout, stderr)
	return stdout
}

// TestAddingAMigration walks README's "Adding a migration" for a benign
// v16 (a new table and an index) in a temporary copy of the migration
// directory, through -dir: hash, lint, plan, up from empty and from the
// v14 fixture, drift clean at 16, plans, schema-doc, fixture-test, freeze
// of a v16 database holding rows, and fixture-test proving the new
// fixture beside the v14 one. Nothing assumes head is 15.
func TestAddingAMigration(t *testing.T) {
	ctx := context.Background()
	dir := copyMigrations(t, benignV16)

	// 1-2. The file is refused until atlas.sum is rehashed.
	mustRun(t, 2, "lint", "-dir", dir)
	out := mustRun(t, 0, "hash", "-dir", dir)
	require.Equal(t, "wrote "+dir+"/atlas.sum (3 files)\n", out)
	m, err := migration.New(os.DirFS(dir), ".")
	require.NoError(t, err)
	require.Equal(t, "16", m.Head())

	// 3. lint: no finding; plan shows the new version.
	out = mustRun(t, 0, "lint", "-dir", dir)
	require.True(t, strings.HasPrefix(out, "lint: 3 file(s), 0 finding(s), 0 above version 14"), out)
	pending := filepath.Join(t.TempDir(), "pending.db")
	out = mustRun(t, 1, "plan", "-db", pending, "-dir", dir)
	require.Contains(t, out, "-- version 16: message_note")
	require.Contains(t, out, "CREATE INDEX message_note_note ON message_note (note);")
	require.NoFileExists(t, pending)

	// up from empty, and from the v14 fixture; drift is clean at 16.
	empty := filepath.Join(t.TempDir(), "empty.db")
	require.Contains(t, mustRun(t, 0, "up", "-db", empty, "-dir", dir), "applied: 14 15 16\nnow at version 16\n")
	v14 := filepath.Join(t.TempDir(), "v14.db")
	require.NoError(t, frozen.Load(ctx, v14, version14.FixtureSQL()))
	require.Contains(t, mustRun(t, 0, "up", "-db", v14, "-dir", dir), "applied: 15 16\nnow at version 16\n")
	for _, db := range []string{empty, v14} {
		mustRun(t, 0, "drift", "-db", db, "-dir", dir)
		require.Equal(t, "current: 16\npending: none\n", mustRun(t, 0, "status", "-db", db, "-dir", dir))
	}
	// The embedded directory (head 15) refuses the v16 database.
	mustRun(t, 2, "status", "-db", v14)

	// 4. The artifacts are written for head 16.
	artifacts := t.TempDir()
	plans, doc := filepath.Join(artifacts, "PLANS.md"), filepath.Join(artifacts, "SCHEMA.md")
	mustRun(t, 0, "plans", "-dir", dir, "-out", plans)
	mustRun(t, 0, "schema-doc", "-dir", dir, "-out", doc)
	b, err := os.ReadFile(plans)
	require.NoError(t, err)
	require.Contains(t, string(b), "# Query plans (schema version 16,")
	b, err = os.ReadFile(doc)
	require.NoError(t, err)
	require.Contains(t, string(b), "# Schema reference (version 16)")
	require.Contains(t, string(b), "message_note")

	// fixture-test proves the v14 fixture at head 16.
	out = mustRun(t, 0, "fixture-test", "-dir", dir)
	require.Contains(t, out, "ok   migrate to head 16: exactly the versions above 14 applied [15 16]")
	require.NotContains(t, out, "FAIL")

	// 5. Freeze a v16 database holding rows: the v14 fixture at 16, plus a
	// message sent through the store at 16.
	kr, err := frozen.Keyring()
	require.NoError(t, err)
	s, err := sqlitestore.Open(ctx, v14, kr, sqlitestore.WithMigrator(m))
	require.NoError(t, err)
	_, err = s.InsertPending(ctx, ids.DeviceAddress{UserID: "dave", DeviceID: 4}, ids.NewLogicalMessageID(), []byte("sent at 16"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fixtures := t.TempDir()
	out = mustRun(t, 0, "freeze", "-db", v14, "-dir", dir, "-out", filepath.Join(fixtures, "version16"))
	require.Contains(t, out, "into "+filepath.Join(fixtures, "version16"))
	contents, err := os.ReadFile(filepath.Join(fixtures, "version16", frozen.ContentsFile))
	require.NoError(t, err)
	require.Contains(t, string(contents), `"schema_version": "16"`)
	require.Contains(t, string(contents), `"pending_outbound_count": 13`)

	// fixture-test proves both fixtures at head 16, the new one from then on.
	copyVersion14(t, filepath.Join(fixtures, "version14"), nil)
	out = mustRun(t, 0, "fixture-test", "-dir", dir, "-fixtures", fixtures)
	require.Contains(t, out, "== "+filepath.Join(fixtures, "version14")+" (version 14)\n")
	require.Contains(t, out, "== "+filepath.Join(fixtures, "version16")+" (version 16)\n")
	require.Contains(t, out, "ok   migrate to head 16: exactly the versions above 16 applied []")
	require.NotContains(t, out, "FAIL")
	// The embedded head 15 cannot prove a version-16 fixture.
	mustRun(t, 1, "fixture-test", "-fixtures", fixtures)
}

// TestAddingADestructiveMigration adds a v16 that drops a table: lint
// flags it, naming the file and the analyzer, and exits 1.
func TestAddingADestructiveMigration(t *testing.T) {
	dir := copyMigrations(t, map[string]string{"16_drop_session.sql": "DROP TABLE session;\n"})
	mustRun(t, 0, "hash", "-dir", dir)
	code, stdout, stderr := runCmd(t, "lint", "-dir", dir)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, `16 16_drop_session.sql: destructive: Dropping table "session" [DS102, line 1]`)
	require.Contains(t, stderr, "finding(s) in versions above 14")
}
