package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// TestExitCodes runs every command clean (0), on something it reports as
// a finding (1) and on something it cannot work on (2): one convention,
// as diff's, on every command.
func TestExitCodes(t *testing.T) {
	notADB := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "notes.txt")
		require.NoError(t, os.WriteFile(path, []byte("this is not a database, only some text long enough to have a header\n"), 0o644))
		return path
	}
	missing := func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing.db") }
	dangling := func(t *testing.T) string {
		dir := t.TempDir()
		path := filepath.Join(dir, "client.db")
		require.NoError(t, os.Symlink(filepath.Join(dir, "gone.db"), path))
		return path
	}
	dropped := headWith("DROP INDEX pending_outbound_message_recipient")
	destructive := func(t *testing.T) string {
		return writeDir(t, withFiles(t, map[string]string{"{next}_drop_session.sql": "DROP TABLE session;\n"}))
	}
	// broken is a directory whose next migration does not replay: it is
	// malformed, whatever a command does with it.
	broken := func(t *testing.T) string {
		return writeDir(t, withFiles(t, map[string]string{"{next}_broken.sql": "CREATE TABLE (;\n"}))
	}
	// refused is a directory whose next migration SQLite refuses.
	refused := func(t *testing.T) string {
		return writeDir(t, withFiles(t, map[string]string{"{next}_refused.sql": "INSERT INTO no_such_table VALUES (1);\n"}))
	}
	late := migrationtest.WithMigrations(t, migrationtest.LateMigration)
	tests := []struct {
		name string
		args func(t *testing.T) []string
		late bool // the embedded directory has 13_late.sql added below 14
		want int
	}{
		{name: "status clean", args: withDB("status", headWith()), want: exitOK},
		{name: "status pending", args: withDB("status", v14With()), want: exitFinding},
		{name: "status out of order", args: withDB("status", headWith()), late: true, want: exitFinding},
		{name: "status missing file", args: withDB("status", missing), want: exitError},
		{name: "status not a database", args: withDB("status", notADB), want: exitError},
		{name: "status dangling link", args: withDB("status", dangling), want: exitError},
		{name: "status newer database", args: withDB("status", headWithFuture()), want: exitError},

		{name: "plan clean", args: withDB("plan", headWith()), want: exitOK},
		{name: "plan pending", args: withDB("plan", v14With()), want: exitFinding},
		{name: "plan pending -json", args: withDB("plan", v14With(), "-json"), want: exitFinding},
		{name: "plan out of order", args: withDB("plan", headWith()), late: true, want: exitFinding},
		{name: "plan not a database", args: withDB("plan", notADB), want: exitError},
		{name: "plan dangling link", args: withDB("plan", dangling), want: exitError},
		{name: "plan dangling link -json", args: withDB("plan", dangling, "-json"), want: exitError},

		{name: "drift clean", args: withDB("drift", headWith()), want: exitOK},
		{name: "drift dropped index", args: withDB("drift", dropped), want: exitFinding},
		{name: "drift dropped index -json", args: withDB("drift", dropped, "-json"), want: exitFinding},
		{name: "drift missing file", args: withDB("drift", missing), want: exitError},
		{name: "drift missing file -json", args: withDB("drift", missing, "-json"), want: exitError},
		{name: "drift not a database", args: withDB("drift", notADB), want: exitError},
		{name: "drift dangling link", args: withDB("drift", dangling), want: exitError},

		{name: "up clean", args: withDB("up", missing), want: exitOK},
		{name: "up at head", args: withDB("up", headWith()), want: exitOK},
		{name: "up out of order", args: withDB("up", headWith()), late: true, want: exitFinding},
		{name: "up not a database", args: withDB("up", notADB), want: exitError},
		{name: "up dangling link", args: withDB("up", dangling), want: exitError},
		{name: "up newer database", args: withDB("up", headWithFuture()), want: exitError},

		{name: "lint clean", args: func(*testing.T) []string { return []string{"lint"} }, want: exitOK},
		{name: "lint finding", args: func(t *testing.T) []string { return []string{"lint", "-dir", destructive(t)} }, want: exitFinding},
		{name: "lint finding -json", args: func(t *testing.T) []string { return []string{"lint", "-json", "-dir", destructive(t)} }, want: exitFinding},
		{name: "lint broken directory", args: func(t *testing.T) []string { return []string{"lint", "-dir", broken(t)} }, want: exitError},
		{name: "plan broken directory", args: func(t *testing.T) []string { return append(withDB("plan", headWith())(t), "-dir", broken(t)) }, want: exitError},
		{name: "status broken directory", args: func(t *testing.T) []string { return append(withDB("status", headWith())(t), "-dir", broken(t)) }, want: exitError},
		{name: "drift broken directory", args: func(t *testing.T) []string { return append(withDB("drift", headWith())(t), "-dir", broken(t)) }, want: exitError},
		{name: "up broken directory", args: func(t *testing.T) []string { return append(withDB("up", headWith())(t), "-dir", broken(t)) }, want: exitError},
		{name: "fixture-test broken directory", args: func(t *testing.T) []string { return []string{"fixture-test", "-dir", broken(t)} }, want: exitError},
		{name: "fixture-test directory SQLite refuses", args: func(t *testing.T) []string { return []string{"fixture-test", "-dir", refused(t)} }, want: exitError},
		{name: "lint missing directory", args: func(t *testing.T) []string { return []string{"lint", "-dir", missing(t)} }, want: exitError},

		{name: "fixture-test clean", args: func(*testing.T) []string { return []string{"fixture-test"} }, want: exitOK},
		{name: "fixture-test no fixture", args: func(t *testing.T) []string { return []string{"fixture-test", "-fixtures", t.TempDir()} }, want: exitError},

		{name: "hash missing directory", args: func(t *testing.T) []string { return []string{"hash", "-dir", missing(t)} }, want: exitError},
		{name: "freeze not at head", args: withDB("freeze", v14With()), want: exitError},

		{name: "usage: no command", args: func(*testing.T) []string { return nil }, want: exitError},
		{name: "usage: unknown command", args: func(*testing.T) []string { return []string{"nope"} }, want: exitError},
		{name: "usage: no -db", args: func(*testing.T) []string { return []string{"status"} }, want: exitError},
		{name: "usage: unknown flag", args: func(*testing.T) []string { return []string{"drift", "-nope"} }, want: exitError},
		{name: "help", args: func(*testing.T) []string { return []string{"-h"} }, want: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args(t)
			var (
				code           int
				stdout, stderr string
			)
			if tt.late {
				code, stdout, stderr = runWith(t, late, args...)
			} else {
				code, stdout, stderr = runCmd(t, args...)
			}
			require.Equal(t, tt.want, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		})
	}
}

// withDB returns the arguments of cmd on the database db makes, then
// more.
func withDB(cmd string, db func(t *testing.T) string, more ...string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		t.Helper()
		return append([]string{cmd, "-db", db(t)}, more...)
	}
}
