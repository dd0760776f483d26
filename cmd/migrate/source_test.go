package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benignV16 is a migration of the next version (head+1) that adds a
// table and an index, and nothing else: a later version no tool should
// trip over.
var benignV16 = map[string]string{
	"{next}_message_note.sql": "CREATE TABLE message_note (id INTEGER PRIMARY KEY, note TEXT NOT NULL);\nCREATE INDEX message_note_note ON message_note (note);\n",
}

// runRaw runs the command line and returns stderr as printed, source line
// included.
func runRaw(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestMigrationsSource checks that every command that reads migrations
// says, first on stderr in text mode and as "migrations" in its JSON
// document, which directory it read and its head: the checkout's by
// default, the -dir one when named.
func TestMigrationsSource(t *testing.T) {
	v16 := writeDir(t, withFiles(t, benignV16))
	db := headDB(t)
	tests := []struct {
		name       string
		args       []string
		want       string // the source line
		code       int
		stdoutHave string
	}{
		{"status, checkout", []string{"status", "-db", db}, "migrate: migrations schema/migrations, head {head}\n", 0, "pending: none"},
		{"status, -dir", []string{"status", "-db", db, "-dir", v16}, "migrate: migrations " + v16 + ", head {next}\n", 1, "pending: {next}"},
		{"plan, -dir", []string{"plan", "-db", db, "-dir", v16}, "migrate: migrations " + v16 + ", head {next}\n", 1, "CREATE TABLE message_note"},
		{"lint, -dir", []string{"lint", "-dir", v16}, "migrate: migrations " + v16 + ", head {next}\n", 0, fmt.Sprintf("lint: %d file(s)", len(allVersions(t))+1)},
		{"fixture-test, -dir", []string{"fixture-test", "-dir", v16}, "migrate: migrations " + v16 + ", head {next}\n", 0, "exactly the versions above 14 applied [{above14} {next}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runRaw(tt.args...)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.True(t, strings.HasPrefix(stderr, expand(t, tt.want)), stderr)
			require.Contains(t, stdout, expand(t, tt.stdoutHave))
		})
	}

	// JSON: the document names it; nothing on stderr.
	code, stdout, stderr := runRaw("status", "-db", db, "-dir", v16, "-json")
	require.Equal(t, 1, code, stderr, "the next version is pending")
	stderr = strings.TrimPrefix(stderr, expand(t, "migrate: status: 1 version(s) pending ({next}): run up\n"))
	require.Empty(t, stderr)
	doc := decode[statusDoc](t, stdout)
	require.Equal(t, v16, doc.Migrations)
	require.Equal(t, nextVersion(t), doc.Head)
	require.Equal(t, []string{nextVersion(t)}, doc.Pending)

	code, stdout, _ = runRaw("status", "-db", db, "-json")
	require.Equal(t, 0, code)
	require.Equal(t, "schema/migrations", decode[statusDoc](t, stdout).Migrations)

	// A -dir that is not there is an error naming it, before any database
	// is touched.
	nope := filepath.Join(t.TempDir(), "nope")
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"up", "-db", db}, {"status", "-db", db}, {"plan", "-db", db}, {"drift", "-db", db},
		{"lint"}, {"freeze", "-db", db, "-out", out}, {"fixture-test"}, {"plans", "-out", out}, {"schema-doc", "-out", out},
	} {
		code, _, stderr := runRaw(append(args, "-dir", nope)...)
		require.Equal(t, 2, code, "%s: %s", args[0], stderr)
		require.Equal(t, "migrate: "+args[0]+": "+nope+": directory does not exist\n", stderr, args[0])
	}
	require.NoFileExists(t, out)
}
