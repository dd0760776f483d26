package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// TestWordsSayWhatIsTrue runs the commands on cases an easy wording would
// misname (a version below head the directory lacks, a file out of order
// but unchanged, and the like), and checks that the words are true.
func TestWordsSayWhatIsTrue(t *testing.T) {
	// A history recording version 10, which the directory lacks:
	// older than head, so not "newer than this code".
	t.Run("a version the directory lacks, below head", func(t *testing.T) {
		path := headDB(t, strings.Replace(migrationtest.FutureRevision(t), "'"+migrationtest.Next(t)+"', 'future'", "'10', 'other branch'", 1))
		for _, cmd := range []string{"status", "plan", "up"} {
			code, stdout, stderr := runCmd(t, cmd, "-db", path)
			require.Equal(t, exitError, code, "%s: %s%s", cmd, stdout, stderr)
			require.Contains(t, stderr, expand(t, "it records version 10, which the migration directory (versions {versions}) does not have"), cmd)
			require.NotContains(t, stderr, "newer", cmd)
		}
	})
	// up and plan run the same checks and agree, counting differences,
	// not the statements of the fix (a column added is one difference,
	// fixed by a table rebuild of several statements).
	for _, tt := range []struct {
		name, stmt, want string
	}{
		{name: "dropped v15 index", stmt: "DROP INDEX pending_outbound_message_recipient", want: "1 schema difference(s)"},
		{name: "added column", stmt: "ALTER TABLE session ADD COLUMN note TEXT", want: "1 schema difference(s)"},
	} {
		t.Run("up and plan agree: "+tt.name, func(t *testing.T) {
			path := headDB(t, tt.stmt)
			before := snapshot(t, filepath.Dir(path))
			upCode, upOut, upErr := runCmd(t, "up", "-db", path)
			planCode, planOut, planErr := runCmd(t, "plan", "-db", path)
			require.Equal(t, exitFinding, upCode, upErr)
			require.Equal(t, upCode, planCode, "plan: %s%s", planOut, planErr)
			require.Contains(t, upErr, tt.want)
			require.Equal(t, strings.Replace(upErr, "migrate: up:", "migrate: plan:", 1), planErr)
			require.Equal(t, upOut, planOut, "the same differences, one a line")
			require.Equal(t, before, snapshot(t, filepath.Dir(path)))
		})
	}
	// atlas.sum's hashes are cumulative: 13_late.sql added below 14 and 15
	// changes their hashes, but not their files.
	t.Run("out of order: unchanged files are not hashing differently", func(t *testing.T) {
		late := migrationtest.WithMigrations(t, migrationtest.LateMigration)
		for _, cmd := range []string{"up", "drift"} {
			path := headDB(t)
			code, stdout, stderr := runWith(t, late, cmd, "-db", path)
			require.Equal(t, exitFinding, code, "%s: %s%s", cmd, stdout, stderr)
			require.Contains(t, stdout+stderr, "13_late.sql", cmd)
			require.NotContains(t, stdout+stderr, "hashes to", cmd)
		}
	})
	t.Run("drift -dir names the directory it read", func(t *testing.T) {
		path := headDB(t, "DELETE FROM schema_revision WHERE version = '15'", "DROP INDEX pending_outbound_message_recipient")
		code, stdout, stderr := runCmd(t, "drift", "-db", path, "-dir", writeDir(t, withFiles(t, nil)))
		require.Equal(t, exitFinding, code, stderr)
		require.Contains(t, stdout, "-- history drift: 1 schema_revision row(s) disagree with the migration directory\n")
		require.NotContains(t, stdout+stderr, "embedded")
	})
	t.Run("a hand-edited atlas.sum line names its file", func(t *testing.T) {
		for line, want := range map[int]string{
			1: "atlas.sum line 1, the sum over its other lines, was edited by hand",
			2: "atlas.sum line 2, 14_baseline.sql, was edited by hand: it does not hash the file",
			3: "atlas.sum line 3, 15_pending_outbound_recipient_index.sql, was edited by hand: it does not hash the file",
		} {
			dir := writeDir(t, withFiles(t, nil))
			sum := filepath.Join(dir, "atlas.sum")
			b, err := os.ReadFile(sum)
			require.NoError(t, err)
			lines := strings.Split(string(b), "\n")
			lines[line-1] = strings.Replace(lines[line-1], "h1:", "h1:X", 1)
			require.NoError(t, os.WriteFile(sum, []byte(strings.Join(lines, "\n")), 0o644))
			code, _, stderr := runCmd(t, "lint", "-dir", dir)
			require.Equal(t, exitError, code)
			require.Contains(t, stderr, want)
		}
	})
	// A migration file edited after hash, or its atlas.sum line removed
	// by hand: the error names the file once, and says which was edited.
	t.Run("atlas.sum out of date or missing a line names the file once", func(t *testing.T) {
		next := nextFile(t, "x")
		for _, tt := range []struct {
			name, want string
			edit       func(t *testing.T, dir string)
		}{
			{"file edited after hash", "checksum mismatch ({headfile} edited since atlas.sum was computed)", func(t *testing.T, dir string) {
				path := filepath.Join(dir, expand(t, "{headfile}"))
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(path, append(b, "-- edited\n"...), 0o644))
			}},
			{"line removed by hand", "atlas.sum has no line for " + next + ", which its line 1 sums: the line was removed by hand", func(t *testing.T, dir string) {
				sum := filepath.Join(dir, "atlas.sum")
				b, err := os.ReadFile(sum)
				require.NoError(t, err)
				var kept []string
				for _, l := range strings.SplitAfter(string(b), "\n") {
					if !strings.HasPrefix(l, next+" ") {
						kept = append(kept, l)
					}
				}
				require.NoError(t, os.WriteFile(sum, []byte(strings.Join(kept, "")), 0o644))
			}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				dir := writeDir(t, withFiles(t, map[string]string{next: "CREATE TABLE x (id INTEGER PRIMARY KEY);\n"}))
				tt.edit(t, dir)
				code, _, stderr := runCmd(t, "lint", "-dir", dir)
				require.Equal(t, exitError, code)
				require.Contains(t, stderr, expand(t, tt.want))
				require.NotContains(t, stderr, "by hand: it does not hash the file")
				file := expand(t, "{headfile}")
				if strings.Contains(tt.want, next) {
					file = next
				}
				require.Equal(t, 1, strings.Count(stderr, file), stderr)
			})
		}
	})
	t.Run("plan -json on a file that is not a database says it exists", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "passwd")
		require.NoError(t, os.WriteFile(path, []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644))
		code, stdout, _ := runCmd(t, "plan", "-db", path, "-json")
		require.Equal(t, exitError, code)
		require.Contains(t, stdout, `"exists": true`)
	})
	t.Run("outside a checkout, only a flag that exists is offered", func(t *testing.T) {
		t.Chdir(t.TempDir())
		code, _, stderr := runCmd(t, "plans", "-out", filepath.Join(t.TempDir(), "PLANS.md"))
		require.Equal(t, exitError, code)
		require.Equal(t, "migrate: plans: not inside a checkout of github.com/securemsg/storage: run it from the repository\n", stderr)
		code, _, stderr = runCmd(t, "schema-doc")
		require.Equal(t, exitError, code)
		require.Equal(t, "migrate: schema-doc: schema/SCHEMA.md: not inside a checkout of github.com/securemsg/storage: run it from the repository, or pass -out FILE\n", stderr)
		code, stdout, stderr := runCmd(t, "schema-doc", "-out", filepath.Join(t.TempDir(), "SCHEMA.md"))
		require.Equal(t, exitOK, code, stderr)
		require.Contains(t, stdout, "wrote ")
	})
}
