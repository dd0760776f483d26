package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// Inside a checkout every command reads its schema/migrations as it is on
// disk, declarations included, whatever the binary embeds: a file added
// after the binary was built is seen (lint, status, fixture-test), and a
// damaged directory is an error, never a silent fall back to the embedded
// copy. Only outside a checkout is the embedded directory read.
func TestCheckoutDirectoryOnDisk(t *testing.T) {
	embedded, err := migration.Default()
	require.NoError(t, err)
	next := nextVersion(t)
	db := headDB(t)
	root := newCheckout(t)
	t.Chdir(root)
	migrations := filepath.Join(root, "schema", "migrations")
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(migrations, name), []byte(content), 0o644))
	}
	source := "migrate: migrations schema/migrations, head " + next + "\n"

	t.Run("a file added after the build", func(t *testing.T) {
		write(next+"_drop_session.sql", "DROP TABLE session;\n")
		mustRun(t, 0, "hash")
		code, stdout, stderr := runRaw("lint")
		require.Equal(t, exitFinding, code, stderr)
		require.True(t, strings.HasPrefix(stderr, source), stderr)
		require.Contains(t, stdout, next+"_drop_session.sql: destructive: Dropping table \"session\" [DS102")
		code, stdout, stderr = runRaw("status", "-db", db)
		require.Equal(t, exitFinding, code, stderr)
		require.Equal(t, "current: "+embedded.Head()+"\npending: "+next+"\n", stdout)
		require.NoError(t, os.Remove(filepath.Join(migrations, next+"_drop_session.sql")))
	})

	t.Run("declarations on disk", func(t *testing.T) {
		write(next+"_session_change.sql", sessionBackfill)
		mustRun(t, 0, "hash")
		code, stdout, stderr := runRaw("fixture-test")
		require.Equal(t, exitFinding, code, "undeclared: %s\n%s", stdout, stderr)
		require.Contains(t, stdout, "no change declared")
		write(next+"_session_change"+".expect.json", sessionBackfillDeclared)
		code, stdout, stderr = runRaw("fixture-test")
		require.Equal(t, exitOK, code, "declared on disk: %s\n%s", stdout, stderr)
		require.True(t, strings.HasPrefix(stderr, source), stderr)
	})

	t.Run("not the embedded copy", func(t *testing.T) {
		// A binary embedding another directory still reports the one on
		// disk.
		other := migrationtest.WithMigrations(t, migrationtest.LateMigration)
		var out, errOut bytes.Buffer
		code := runEnv([]string{"status", "-db", db}, &cmdEnv{stdout: &out, stderr: &errOut,
			embedded: func() (*migration.Migrator, error) { return migration.New(other, ".") }})
		require.Equal(t, exitFinding, code, errOut.String())
		require.Equal(t, "current: "+embedded.Head()+"\npending: "+next+"\n", out.String())
		require.True(t, strings.HasPrefix(errOut.String(), source), errOut.String())
	})

	t.Run("damaged", func(t *testing.T) {
		write(next+"_session_change.sql", sessionBackfill+"-- edited\n")
		code, _, stderr := runRaw("status", "-db", db)
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, "migrate: status: schema/migrations: ")
		require.NotContains(t, stderr, "embedded")
	})

	t.Run("outside a checkout", func(t *testing.T) {
		t.Chdir(t.TempDir())
		code, stdout, stderr := runRaw("status", "-db", db)
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, "migrate: migrations embedded, head "+embedded.Head()+"\n", stderr)
		require.Equal(t, "current: "+embedded.Head()+"\npending: none\n", stdout)
	})
}
