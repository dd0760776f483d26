package main

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// runWith runs the command line args with dir as the binary's embedded
// migration directory, as outside a checkout (where the embedded one is
// read).
func runWith(t *testing.T, dir fs.FS, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &errOut, embedded: func() (*migration.Migrator, error) { return migration.New(dir, ".") },
		checkout: func() (string, error) { return "", errNotInRepo }}
	code = runEnv(args, env)
	return code, out.String(), withoutSource(errOut.String())
}

// TestOutOfOrderCommands adds 13_late.sql below the landed 14 and 15 and
// rehashes: on a database at 15 (with history) and one adopted at 14
// (without), status, plan, up, drift and lint -db each name the file and
// exit non-zero, and nothing changes the database; a new database gets it.
func TestOutOfOrderCommands(t *testing.T) {
	late := migrationtest.WithMigrations(t, migrationtest.LateMigration)
	lateDir := writeDir(t, late)
	for _, db := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"at head", func(t *testing.T) string { return headDB(t) }},
		{"legacy v14", func(t *testing.T) string { return v14DB(t) }},
	} {
		for _, cmd := range [][]string{
			{"status"}, {"status", "-json"}, {"plan"}, {"plan", "-json"}, {"up"}, {"drift"}, {"drift", "-json"},
			{"lint", "-dir", lateDir}, {"lint", "-dir", lateDir, "-json"},
		} {
			t.Run(db.name+"/"+cmd[0]+" "+cmd[len(cmd)-1], func(t *testing.T) {
				path := db.path(t)
				before := snapshot(t, filepath.Dir(path))
				code, stdout, stderr := runWith(t, late, append(cmd, "-db", path)...)
				require.NotEqual(t, 0, code, "%s\n%s", stdout, stderr)
				require.Contains(t, stdout+stderr, "13_late.sql")
				require.Equal(t, before, snapshot(t, filepath.Dir(path)), "nothing changed")
			})
		}
	}
	// Without a database: lint -dir against the directory the binary was
	// built with, and fixture-test, whose version-14 fixture up refuses.
	t.Run("lint -dir against the shipped directory", func(t *testing.T) {
		code, stdout, stderr := runCmd(t, "lint", "-dir", lateDir)
		require.Equal(t, exitFinding, code, stderr)
		require.Contains(t, stdout, expand(t, "13 13_late.sql: order: version 13 is at or below version {head}, the head already shipped"))
		code, _, stderr = runCmd(t, "lint", "-dir", writeDir(t, withFiles(t, nil)))
		require.Equal(t, exitOK, code, "the shipped directory itself: %s", stderr)
	})
	t.Run("fixture-test", func(t *testing.T) {
		code, stdout, stderr := runWith(t, late, "fixture-test")
		require.Equal(t, exitFinding, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		require.Contains(t, stdout, "13_late.sql")
	})
	t.Run("new database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "client.db")
		code, stdout, stderr := runWith(t, late, "up", "-db", path)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, expand(t, "applied: 13 {versions}\n"))
		code, stdout, stderr = runWith(t, late, "status", "-db", path)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, expand(t, "current: {head}\npending: none\n"), stdout)
	})
}
