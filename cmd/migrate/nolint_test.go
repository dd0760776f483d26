package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// versionsAfterHead returns n versions after the embedded head, of its
// width.
func versionsAfterHead(t *testing.T, n int) []string {
	t.Helper()
	next, err := strconv.Atoi(nextVersion(t))
	require.NoError(t, err)
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%0*d", len(nextVersion(t)), next+i))
	}
	return out
}

// atlas:nolint directives are honoured as Atlas's migrate lint honours
// them: in a statement's comments for that statement (all, a code, or an
// analyzer), in the file's header (a blank line before the first
// statement) for the whole file.
func TestLintNolint(t *testing.T) {
	v := versionsAfterHead(t, 2)
	create := v[0] + "_scratch.sql"
	const table = "CREATE TABLE scratch (id INTEGER PRIMARY KEY, a TEXT, b TEXT);\n"
	change := v[1] + "_change.sql"
	for _, tt := range []struct {
		name, sql string
		code      int
		lines     []int // the lines of the blocking findings left
		shows     string
	}{
		{name: "no directive", sql: "ALTER TABLE scratch DROP COLUMN a;\n", code: exitFinding, lines: []int{1}},
		{name: "the code", sql: "-- atlas:nolint DS103\nALTER TABLE scratch DROP COLUMN a;\n", code: exitOK},
		{name: "the analyzer", sql: "-- the column is unused\n-- atlas:nolint destructive\nALTER TABLE scratch DROP COLUMN a;\n", code: exitOK},
		{name: "every analyzer", sql: "-- atlas:nolint\nALTER TABLE scratch DROP COLUMN a;\n", code: exitOK},
		{name: "another code", sql: "-- atlas:nolint DS102\nALTER TABLE scratch DROP COLUMN a;\n", code: exitFinding, lines: []int{2}},
		{name: "one statement only", sql: "-- atlas:nolint DS103\nALTER TABLE scratch DROP COLUMN a;\nALTER TABLE scratch DROP COLUMN b;\n", code: exitFinding, lines: []int{3}},
		{name: "the file", sql: "-- atlas:nolint\n\nALTER TABLE scratch DROP COLUMN a;\nALTER TABLE scratch DROP COLUMN b;\n", code: exitOK},
		{name: "the file, for an analyzer", sql: "-- atlas:nolint destructive\n\nALTER TABLE scratch DROP COLUMN a;\nDELETE FROM scratch;\n", code: exitFinding, lines: []int{4}, shows: "DELETE without WHERE removes every row of table \"scratch\" [WT101, line 4]"},
		{name: "a delete without where", sql: "DELETE FROM scratch;\n", code: exitFinding, lines: []int{1}},
		{name: "a delete with where", sql: "DELETE FROM scratch WHERE a = 'where';\n", code: exitOK},
		{name: "a delete accepted", sql: "-- atlas:nolint WT101\nDELETE FROM scratch;\n", code: exitOK},
		{name: "a backfill informs", sql: "UPDATE scratch SET a = 'x';\n", code: exitOK, shows: "UPDATE without WHERE changes every row of table \"scratch\" [WT102, line 1] (informational: an UPDATE of every row is a backfill"},
		{
			name: "a rebuild, accepted at its DROP TABLE",
			sql:  "CREATE TABLE new_scratch (id INTEGER PRIMARY KEY, a TEXT);\nINSERT INTO new_scratch (id, a) SELECT id, a FROM scratch;\n-- atlas:nolint DS103\nDROP TABLE scratch;\nALTER TABLE new_scratch RENAME TO scratch;\n",
			code: exitOK,
		},
		{
			name: "a rebuild",
			sql:  "CREATE TABLE new_scratch (id INTEGER PRIMARY KEY, a TEXT);\nINSERT INTO new_scratch (id, a) SELECT id, a FROM scratch;\nDROP TABLE scratch;\nALTER TABLE new_scratch RENAME TO scratch;\n",
			code: exitFinding, lines: []int{1},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyMigrations(t, map[string]string{create: table, change: tt.sql})
			mustRun(t, 0, "hash", "-dir", dir)
			code, stdout, stderr := runCmd(t, "lint", "-dir", dir, "-json")
			require.Equal(t, tt.code, code, "%s\n%s", stdout, stderr)
			doc := decode[lintDoc](t, stdout)
			var lines []int
			for _, f := range doc.Findings {
				if f.Blocking {
					require.Equal(t, change, f.File, "only the changing file has findings: %+v", f)
					lines = append(lines, f.Line)
				}
			}
			require.Equal(t, tt.lines, lines, "%+v", doc.Findings)
			if tt.shows != "" {
				_, stdout, _ := runCmd(t, "lint", "-dir", dir)
				require.Contains(t, stdout, tt.shows)
			}
		})
	}
}

// lint -git-base REF blocks only on the files added (or changed) since
// REF: a landed file's findings inform.
func TestLintGitBaseLanded(t *testing.T) {
	v := versionsAfterHead(t, 3)
	root, dir := gitRepo(t)
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write(v[0]+"_scratch.sql", "CREATE TABLE scratch (id INTEGER PRIMARY KEY, a TEXT);\n")
	write(v[1]+"_landed.sql", "ALTER TABLE scratch DROP COLUMN a;\n")
	mustRun(t, 0, "hash", "-dir", dir)
	git(t, root, "add", ".")
	git(t, root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "landed")

	code, stdout, stderr := runCmd(t, "lint", "-dir", dir)
	require.Equal(t, exitFinding, code, "without a base, the landed file blocks: %s%s", stdout, stderr)
	code, stdout, stderr = runCmd(t, "lint", "-dir", dir, "-git-base", "main")
	require.Equal(t, exitOK, code, "%s%s", stdout, stderr)
	require.Contains(t, stdout, v[1]+"_landed.sql: destructive: Dropping non-virtual column \"a\" [DS103, line 1] (informational: landed in main)")
	require.Contains(t, stdout, "0 blocking (files added or changed since main)")

	write(v[2]+"_added.sql", "DELETE FROM scratch;\n")
	mustRun(t, 0, "hash", "-dir", dir)
	code, stdout, stderr = runCmd(t, "lint", "-dir", dir, "-git-base", "main", "-json")
	require.Equal(t, exitFinding, code, "%s%s", stdout, stderr)
	doc := decode[lintDoc](t, stdout)
	require.Equal(t, 1, doc.Blocking)
	require.Equal(t, "1 finding(s) in files added or changed since main", doc.Error)
	for _, f := range doc.Findings {
		require.Equal(t, f.File == v[2]+"_added.sql", f.Blocking, "%+v", f)
	}

	// A landed file changed since the base blocks again: its findings,
	// and the edit itself (an order finding).
	write(v[1]+"_landed.sql", "-- edited after it landed\nALTER TABLE scratch DROP COLUMN a;\n")
	mustRun(t, 0, "hash", "-dir", dir)
	code, stdout, stderr = runCmd(t, "lint", "-dir", dir, "-git-base", "main", "-json")
	require.Equal(t, exitFinding, code, "%s%s", stdout, stderr)
	doc = decode[lintDoc](t, stdout)
	require.Equal(t, 3, doc.Blocking)
	require.Equal(t, "3 finding(s) in files added or changed since main", doc.Error)
	for _, f := range doc.Findings {
		require.Equal(t, f.File == v[2]+"_added.sql" || f.File == v[1]+"_landed.sql", f.Blocking, "%+v", f)
	}
}

func git(t *testing.T, root string, args ...string) {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
}

// A destructive change that is directed (atlas:nolint) and declared
// (NN_description.expect.json) passes every step CI runs: lint,
// fixture-test, and freeze; without the directive lint blocks it.
func TestDirectedDeclaredDrop(t *testing.T) {
	v := versionsAfterHead(t, 2)
	const drop = "-- note is read nowhere.\n-- atlas:nolint DS103\nALTER TABLE session DROP COLUMN note;\n"
	for _, tt := range []struct {
		name, sql, declared   string
		lint, fixture, freeze int
	}{
		{name: "directed and declared", sql: drop, declared: `{"dropped": ["session.note"]}`},
		{name: "not directed", sql: strings.ReplaceAll(drop, "-- atlas:nolint DS103\n", ""), declared: `{"dropped": ["session.note"]}`, lint: exitFinding},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := newCheckout(t)
			t.Chdir(root)
			migrations := filepath.Join("schema", "migrations")
			write := func(name, content string) {
				require.NoError(t, os.WriteFile(filepath.Join(migrations, name), []byte(content), 0o644))
			}
			write(v[0]+"_session_note.sql", "ALTER TABLE session ADD COLUMN note TEXT;\n")
			write(v[1]+"_drop_note.sql", tt.sql)
			if tt.declared != "" {
				write(v[1]+"_drop_note.expect.json", tt.declared)
			}
			mustRun(t, 0, "hash")
			mustRun(t, tt.lint, "lint")
			mustRun(t, tt.fixture, "fixture-test")
			mustRun(t, tt.freeze, "freeze")
			if tt.freeze == exitOK {
				require.DirExists(t, filepath.Join("fixtures", "version"+v[1]))
				mustRun(t, tt.fixture, "fixture-test")
			}
		})
	}
}
