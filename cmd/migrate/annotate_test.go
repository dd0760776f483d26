package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// inCheckout makes a temporary checkout (newCheckout) with files added to
// its schema/migrations, and makes it the working directory.
func inCheckout(t *testing.T, files map[string]string) {
	t.Helper()
	root := newCheckout(t)
	for name, content := range expandNames(t, files) {
		require.NoError(t, os.WriteFile(filepath.Join(root, "schema", "migrations", name), []byte(content), 0o644))
	}
	t.Chdir(root)
	if len(files) > 0 {
		mustRun(t, 0, "hash")
	}
}

// lineOf returns the 1-based line of file holding substr.
func lineOf(t *testing.T, file, substr string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			return i + 1
		}
	}
	t.Fatalf("%s holds no %q", file, substr)
	return 0
}

// TestAnnotations: lint, drift and fixture-test print each finding as a
// GitHub workflow command or a compiler line, at the file and line of the
// finding relative to the repository root, and nothing else on stdout;
// the exit code and the line on stderr are those of the text report.
func TestAnnotations(t *testing.T) {
	const drop = "{next}_drop_session.sql"
	dropped := headDB(t, "DROP INDEX pending_outbound_message_recipient")
	for _, tt := range []struct {
		name  string
		files map[string]string
		args  []string
		// first is the first line of stdout; every line starts with
		// prefix.
		first, prefix string
		stderr        string
	}{
		{
			name: "lint gcc", files: map[string]string{drop: "DROP TABLE session;\n"}, args: []string{"lint", "-format", "gcc"},
			first:  `schema/migrations/{next}_drop_session.sql:1:1: error: destructive: Dropping table "session" [DS102]`,
			prefix: "schema/migrations/{next}_drop_session.sql:1:1: error: ", stderr: "finding(s) in versions above 14",
		},
		{
			name: "lint github", files: map[string]string{drop: "\nDROP TABLE session;\n"}, args: []string{"lint", "-format", "github"},
			first:  `::error file=schema/migrations/{next}_drop_session.sql,line=2,col=1::destructive: Dropping table "session" [DS102]`,
			prefix: "::error file=schema/migrations/{next}_drop_session.sql,line=2,col=1::", stderr: "finding(s) in versions above 14",
		},
		{
			name: "drift github", args: []string{"drift", "-db", dropped, "-format", "github"},
			first: "::error file=schema/migrations/15_pending_outbound_recipient_index.sql,line=" +
				strconv.Itoa(lineOf(t, filepath.Join(repo, "schema", "migrations", "15_pending_outbound_recipient_index.sql"), "CREATE INDEX pending_outbound_message_recipient")) +
				",col=1::table pending_outbound_message: index pending_outbound_message_recipient is at head, missing from the database",
			prefix: "::error file=schema/migrations/15_pending_outbound_recipient_index.sql,", stderr: "drift from head: 1 schema difference(s)",
		},
		{
			name: "fixture-test gcc", files: map[string]string{"{next}_session_change.sql": sessionBackfill}, args: []string{"fixture-test", "-format", "gcc"},
			first:  "fixtures/version14/fixture.sql:100:1: error: every column kept keeps its value, unless a change is declared: table session, row (user_id='bob', device_id=1), column last_seen (added): holds 10, not its declared default NULL",
			prefix: "fixtures/version14/fixture.sql:100:1: error: ", stderr: "1 of 1 fixture(s) failed",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inCheckout(t, tt.files)
			args := append(tt.args, "-dir", filepath.Join("schema", "migrations"))
			code, stdout, stderr := runCmd(t, args...)
			require.Equal(t, exitFinding, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stderr, tt.stderr)
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			first, prefix := expand(t, tt.first), expand(t, tt.prefix)
			require.True(t, strings.HasPrefix(lines[0], first), "%s\nwant prefix %s", lines[0], first)
			for _, l := range lines {
				require.True(t, strings.HasPrefix(l, prefix), l)
			}
		})
	}
}

// Outside the checkout a path is given as it is; nothing found prints
// nothing; a bad -format, or one with -json, is a usage error (with the
// JSON document under -json).
func TestAnnotationFlags(t *testing.T) {
	dir := writeDir(t, withFiles(t, map[string]string{"{next}_drop_session.sql": "DROP TABLE session;\n"}))
	code, stdout, _ := runCmd(t, "lint", "-dir", dir, "-format", "gcc")
	require.Equal(t, exitFinding, code)
	require.True(t, strings.HasPrefix(stdout, filepath.Join(dir, nextFile(t, "drop_session"))+":1:1: error: destructive: "), stdout)

	code, stdout, stderr := runCmd(t, "drift", "-db", headDB(t), "-format", "github")
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, stdout)

	code, _, stderr = runCmd(t, "fixture-test", "-format", "xml")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, `-format "xml": want text, github or gcc`)
	code, stdout, _ = runCmd(t, "lint", "-format", "gcc", "-json")
	require.Equal(t, exitError, code)
	doc := decode[lintDoc](t, stdout)
	require.Equal(t, "-format gcc and -json are exclusive: give one", doc.Error)
}

func TestWorkflowCommandEscapes(t *testing.T) {
	require.Equal(t, "100%25 a%0Ab%0D", escapeData("100% a\nb\r"))
	require.Equal(t, "a%3Ab%2Cc", escapeProperty("a:b,c"))
}

// -format github escapes a message as the runner unescapes a workflow
// command's data (% as %25, CR as %0D, LF as %0A) and folds nothing, so
// that a line break and a blank stay distinct; the file, a property, also
// has its colons and commas escaped. -format gcc folds a message onto one
// line.
func TestAnnotateGitHubEscapes(t *testing.T) {
	as := []annotation{
		{file: "a,b:c.sql", line: 2, severity: "error", msg: "a\nb"},
		{file: "x.sql", severity: "warning", msg: "a b"},
		{file: "x.sql", severity: "error", msg: "100%  x\r\n  y"},
	}
	var out strings.Builder
	(&cmdEnv{stdout: &out, format: formatGitHub}).annotate(as)
	require.Equal(t, "::error file=a%2Cb%3Ac.sql,line=2,col=1::a%0Ab\n"+
		"::warning file=x.sql,line=1,col=1::a b\n"+
		"::error file=x.sql,line=1,col=1::100%25  x%0D%0A  y\n", out.String())
	out.Reset()
	(&cmdEnv{stdout: &out, format: formatGCC}).annotate(as)
	require.Equal(t, "a,b:c.sql:2:1: error: a b\nx.sql:1:1: warning: a b\nx.sql:1:1: error: 100% x y\n", out.String())
}
