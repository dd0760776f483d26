package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// gitRepo makes a git repository holding a checkout's go.mod and the
// shipped migration directory committed on branch main, and returns its
// root and the directory.
func gitRepo(t *testing.T) (root, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root = t.TempDir()
	dir = filepath.Join(root, "schema", "migrations")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for n, f := range withFiles(t, nil) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), f.Data, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n"), 0o644))
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "shipped"},
	} {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	return root, dir
}

// TestLintGitBase adds 10_x.sql below the base branch's head and
// rehashes: lint -git-base main flags it whatever the binary embeds
// (built with the new file in, as go run builds it, or without), with
// -dir and without; a file above the base's head, and the base's own
// unchanged files, are not flagged; a REF that is not a commit is an
// error.
func TestLintGitBase(t *testing.T) {
	added := map[string]string{"10_x.sql": "CREATE TABLE x (id INTEGER PRIMARY KEY);\n"}
	above := map[string]string{"{next}_y.sql": "CREATE TABLE y (id INTEGER PRIMARY KEY);\n"}
	finding := expand(t, "10 10_x.sql: order: version 10 is at or below version {head}, the head of main, but not in that directory")
	write := func(t *testing.T, dir string, files map[string]string) {
		for n, f := range withFiles(t, files) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, n), f.Data, 0o644))
		}
	}
	t.Run("embedded with the new file, as go run builds it", func(t *testing.T) {
		root, dir := gitRepo(t)
		write(t, dir, added)
		t.Chdir(root)
		embedded := migrationtest.WithMigrations(t, added)
		code, stdout, stderr := runWith(t, embedded, "lint")
		require.Equal(t, exitOK, code, "without a base the new file goes unnoticed: %s%s", stdout, stderr)
		code, stdout, stderr = runWith(t, embedded, "lint", "-git-base", "main")
		require.Equal(t, exitFinding, code, stderr)
		require.Contains(t, stdout, finding)
		require.NotContains(t, stdout, "14_baseline.sql: order")
		require.NotContains(t, stdout, "15_pending_outbound_recipient_index.sql: order")
	})
	t.Run("-dir, from outside the repository", func(t *testing.T) {
		_, dir := gitRepo(t)
		write(t, dir, added)
		code, stdout, stderr := runCmd(t, "lint", "-dir", dir, "-git-base", "main", "-json")
		require.Equal(t, exitFinding, code, stderr)
		require.Contains(t, stdout, `"file": "10_x.sql"`)
		require.Contains(t, stdout, `"analyzer": "order"`)
	})
	t.Run("a file above the base's head", func(t *testing.T) {
		_, dir := gitRepo(t)
		write(t, dir, above)
		code, stdout, stderr := runCmd(t, "lint", "-dir", dir, "-git-base", "main")
		require.NotContains(t, stdout, ": order:")
		require.NotEqual(t, exitError, code, stderr)
	})
	t.Run("not a commit", func(t *testing.T) {
		_, dir := gitRepo(t)
		code, _, stderr := runCmd(t, "lint", "-dir", dir, "-git-base", "nope")
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, "-git-base nope: not a commit of the repository holding "+dir)
	})
}

// TestLintLandedFileChanged edits, then removes, the landed head file and
// rehashes: lint -git-base main flags either, and lint -dir (against the
// directory this binary embeds) the edit, each as one blocking order
// finding naming the file, in text, -json and -format github. A -dir
// without the shipped head file is an older directory: not flagged.
func TestLintLandedFileChanged(t *testing.T) {
	edited := withFiles(t, map[string]string{"{headfile}": "CREATE TABLE edited (id INTEGER PRIMARY KEY);\n"})
	removed := throughWith(t, expand(t, "{beforehead}"), nil)
	tests := []struct {
		name  string
		files fstest.MapFS
		args  []string
		text  string // "" when nothing is flagged
	}{
		{"edited -git-base", edited, []string{"-git-base", "main"}, "{head} {headfile}: order: {headfile} differs from the file in main: a landed migration is never edited"},
		{"edited shipped", edited, nil, "{head} {headfile}: order: {headfile} differs from the file in the directory already shipped: a landed migration is never edited"},
		{"removed -git-base", removed, []string{"-git-base", "main"}, "{head} {headfile}: order: {headfile} is in main but not in this directory"},
		{"removed shipped", removed, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, dir := gitRepo(t)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				require.NoError(t, os.Remove(filepath.Join(dir, e.Name())))
			}
			for n, f := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), f.Data, 0o644))
			}
			args := append([]string{"lint", "-dir", dir}, tt.args...)
			code, stdout, stderr := runCmd(t, args...)
			if tt.text == "" {
				require.Equal(t, exitOK, code, "%s%s", stdout, stderr)
				require.NotContains(t, stdout, ": order:")
				return
			}
			require.Equal(t, exitFinding, code, "%s%s", stdout, stderr)
			require.Equal(t, 1, strings.Count(stdout, expand(t, tt.text)), stdout)
			require.Equal(t, 1, strings.Count(stdout, ": order:"), stdout)

			code, stdout, stderr = runCmd(t, append(args, "-json")...)
			require.Equal(t, exitFinding, code, stderr)
			doc := decode[lintDoc](t, stdout)
			require.Len(t, doc.Findings, 1, stdout)
			require.Equal(t, expand(t, "{headfile}"), doc.Findings[0].File)
			require.Equal(t, "order", doc.Findings[0].Analyzer)
			require.True(t, doc.Findings[0].Blocking)

			code, stdout, stderr = runCmd(t, append(args, "-format", "github")...)
			require.Equal(t, exitFinding, code, stderr)
			require.Contains(t, stdout, expand(t, "::error file="+filepath.Join(dir, "{headfile}")))
		})
	}
}

// TestLintBranchBehindBase: a branch that left main before main landed a
// new migration lacks that file without having removed it: lint
// -git-base main flags nothing of main's files (a branch checked out as
// its own head, as CI does outside a merge commit, or locally before a
// rebase), while the branch removing a file main had when it left is
// still flagged.
func TestLintBranchBehindBase(t *testing.T) {
	git := func(t *testing.T, root string, args ...string) {
		t.Helper()
		args = append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	for _, tt := range []struct {
		name string
		// onBranch runs on the branch, after main landed {next}.
		onBranch func(t *testing.T, root, dir string)
		text     string // the order finding, "" when none
	}{
		{"behind", nil, ""},
		{"behind, the head file it had removed", func(t *testing.T, root, dir string) {
			files := throughWith(t, expand(t, "{beforehead}"), nil)
			require.NoError(t, os.Remove(filepath.Join(dir, expand(t, "{headfile}"))))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "atlas.sum"), files["atlas.sum"].Data, 0o644))
		}, "{head} {headfile}: order: {headfile} is in main but not in this directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := gitRepo(t)
			git(t, root, "branch", "feature")
			for n, f := range withFiles(t, map[string]string{"{next}_y.sql": "CREATE TABLE y (id INTEGER PRIMARY KEY);\n"}) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), f.Data, 0o644))
			}
			git(t, root, "add", ".")
			git(t, root, "commit", "-q", "-m", "main lands {next}")
			git(t, root, "checkout", "-q", "feature")
			if tt.onBranch != nil {
				tt.onBranch(t, root, dir)
			}
			code, stdout, stderr := runCmd(t, "lint", "-dir", dir, "-git-base", "main")
			if tt.text == "" {
				require.NotContains(t, stdout, ": order:")
				require.Equal(t, exitOK, code, "%s%s", stdout, stderr)
				return
			}
			require.Equal(t, exitFinding, code, "%s%s", stdout, stderr)
			require.Equal(t, 1, strings.Count(stdout, expand(t, tt.text)), stdout)
			require.Equal(t, 1, strings.Count(stdout, ": order:"), stdout)
		})
	}
}
