package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// guideCheckoutEnv is set, to the checkout's path, in the tests that
// TestGuideNextMigrationKeepsTestsGreen runs inside its checkout, so that
// it does not run itself there again.
const guideCheckoutEnv = "MIGRATE_GUIDE_CHECKOUT"

// guideNextMigration is the next version the guide test adds, changing
// the layout the way a real next version does: a new table, a nullable
// column on session and on processed_inbound_message, and a column with
// a DEFAULT on the pending table (which the legacy upgrade rebuilds) with
// an index on it. The version after drops only the pending column and
// its index, so both modules' tests run at a head whose layout is not
// today's: the new table and the two nullable columns stay.
const guideNextMigration = `-- The guide test's next version: a device label table, when a session was
-- last used, the envelope type of a processed message, and the delivery
-- attempts of each pending message with the index that finds the
-- messages tried most. None holds anything for existing rows but the
-- attempts' default.

-- The user's label of a remote device. Holds no message content.
CREATE TABLE guide_device_label (
  user_id   TEXT    NOT NULL,
  device_id INTEGER NOT NULL CHECK (device_id >= 0),
  label     TEXT    NOT NULL,
  PRIMARY KEY (user_id, device_id)
);

-- Unix seconds of the session's last use; NULL until it is next used.
ALTER TABLE session ADD COLUMN guide_last_used_at INTEGER;

-- The envelope type of a processed message; NULL for those before it.
ALTER TABLE processed_inbound_message ADD COLUMN guide_envelope_type INTEGER;

-- Delivery attempts of each pending message.
ALTER TABLE pending_outbound_message ADD COLUMN guide_attempts INTEGER NOT NULL DEFAULT 0;
CREATE INDEX pending_outbound_message_guide_attempts ON pending_outbound_message (guide_attempts);
`

// guideKept is what guideNextMigration adds and the version after it
// keeps: in the frozen fixtures, and in the store code sqlc generates.
var guideKept = struct{ fixture, models []string }{
	fixture: []string{"CREATE TABLE guide_device_label (", `"guide_last_used_at"`, `"guide_envelope_type"`},
	models:  []string{"type GuideDeviceLabel struct", "GuideLastUsedAt", "GuideEnvelopeType"},
}

// guideDestructiveMigration is the version after it: a directed, declared
// destructive change, as the guide's "Accepting a finding" and
// "Declaring a change" say (the index dropped, whose loss changes the
// plans of the queries that used it, and the pending column dropped with
// its values; the new table and the other new columns stay).
const guideDestructiveMigration = `-- The delivery attempts are no longer kept.
-- atlas:nolint QP101
DROP INDEX pending_outbound_message_guide_attempts;
-- atlas:nolint DS103
ALTER TABLE pending_outbound_message DROP COLUMN guide_attempts;
`

// guideDestructiveDeclaration declares what guideDestructiveMigration
// does to existing data.
const guideDestructiveDeclaration = `{"dropped": ["pending_outbound_message.guide_attempts"]}
`

// TestGuideNextMigrationKeepsTestsGreen exists because adding the next
// migration must be routine: no test of either module may hard-wire the
// head or today's layout (a table's columns, the tables there are), and
// the legacy upgrade and the fixture proofs must follow it. It copies the
// checkout (the files git tracks, and the untracked ones it does not
// ignore, as they are on disk) into a temporary directory, adds there the
// next version (guideNextMigration: a new table, nullable columns on
// session and processed_inbound_message, a column with a DEFAULT and an
// index on the pending table) and the version after it, a directed,
// declared destructive change that drops the pending column and its index
// (guideDestructiveMigration), each by the guide's "Adding a migration"
// steps (cmd/migrate/README.md) as a developer runs them (build
// bin/migrate, write NN_description.sql, then every command of the steps
// in order: hash, lint, plan, sqlc's generate, plans, schema-doc,
// fixture-test and freeze, each with -dir schema/migrations as the guide
// allows), and then runs both modules' tests there (go test ./... and go
// -C cmd test ./..., without -race) at that head, whose layout differs
// from today's by the new table and the two new columns: all must pass. The repository itself is never
// written. It takes minutes (it builds and runs both modules' tests once
// more); -short skips it, and CI runs it (go -C cmd test -race ./...).
func TestGuideNextMigrationKeepsTestsGreen(t *testing.T) {
	if os.Getenv(guideCheckoutEnv) != "" {
		t.Skip("inside the guide test's own checkout")
	}
	if testing.Short() {
		t.Skip("-short: the guide test builds and runs both modules' tests (minutes)")
	}
	root, err := filepath.Abs(repo)
	require.NoError(t, err)
	start := time.Now()
	phase := func(name string, since time.Time) {
		t.Logf("%s: %s", name, time.Since(since).Round(100*time.Millisecond))
	}

	checkout := copyCheckout(t, root)
	phase("copy the checkout", start)

	// run runs a command in the checkout and requires its exit code.
	run := func(want int, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = checkout
		cmd.Env = append(os.Environ(), guideCheckoutEnv+"="+checkout)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "%s %v: %v", name, args, err)
			code = ee.ExitCode()
		}
		require.Equal(t, want, code, "%s %s\n%s", name, strings.Join(args, " "), tail(out.String(), 200))
		return out.String()
	}

	// The build line of "In a pipeline", then the hand step.
	readme, err := os.ReadFile(filepath.Join(checkout, "cmd", "migrate", "README.md"))
	require.NoError(t, err)
	const build = "go -C cmd build -o ../bin/ ./migrate"
	require.Contains(t, string(readme), "    "+build+"\n", "the guide's build command")
	t0 := time.Now()
	run(0, "go", strings.Fields(build)[1:]...)
	phase("build bin/migrate", t0)
	migrations := filepath.Join("schema", "migrations")
	section := string(readme)
	i := strings.Index(section, "\n## Adding a migration\n")
	require.GreaterOrEqual(t, i, 0)
	section = section[i+1:]
	if j := strings.Index(section[1:], "\n#"); j >= 0 {
		section = section[:j+1]
	}
	// steps runs every command of the guide's steps, in order, for the
	// migration just written.
	steps := func() {
		t.Helper()
		var ran []string
		for _, s := range guideSteps(t, section) {
			t0 := time.Now()
			if s.args == nil {
				require.Contains(t, s.text, "sqlc generate", "a command of the guide this test does not know")
				f := strings.Fields(s.text)
				run(0, f[0], f[1:]...)
			} else {
				want := 0
				if s.args[0] == "plan" {
					want = exitFinding // the new version is pending on pending.db
				}
				run(want, filepath.Join(checkout, "bin", "migrate"), append(s.args, "-dir", migrations)...)
			}
			ran = append(ran, s.text)
			phase(s.text, t0)
		}
		require.NotEmpty(t, ran)
		require.NoFileExists(t, filepath.Join(checkout, "pending.db"), "plan creates nothing")
	}

	// read returns a file of the checkout.
	read := func(file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(checkout, filepath.FromSlash(file)))
		require.NoError(t, err)
		return string(b)
	}

	// The next version: a new table, two nullable columns, a column with
	// a DEFAULT and an index.
	next := nextVersion(t)
	require.NoError(t, os.WriteFile(filepath.Join(checkout, migrations, nextFile(t, "guide_layout")), []byte(guideNextMigration), 0o644))
	// Step 1: what it adds in the clear goes into SECURITY.md's table.
	clearColumns(t, checkout, map[string]string{
		"session":                   ", `guide_last_used_at`",
		"processed_inbound_message": ", `guide_envelope_type`",
		"pending_outbound_message":  ", `guide_attempts`",
	}, "| `guide_device_label` | `user_id`, `device_id`, `label` |")
	steps()
	// What the steps made: the frozen fixture of the new version, the
	// regenerated documents and store code.
	fixture := read("fixtures/version" + next + "/fixture.sql")
	models := read("internal/db/models.go")
	require.Contains(t, fixture, `"guide_attempts"`)
	require.Contains(t, models, "GuideAttempts")
	for _, want := range guideKept.fixture {
		require.Contains(t, fixture, want)
	}
	for _, want := range guideKept.models {
		require.Contains(t, models, want)
	}
	require.Contains(t, read("queries/PLANS.md"), "# Query plans (schema version "+next+",")
	doc := read("schema/SCHEMA.md")
	require.Contains(t, doc, "# Schema reference (version "+next+")")
	require.Contains(t, doc, "\n## guide_device_label\n")

	// The version after: a directed, declared destructive change.
	n, err := strconv.Atoi(next)
	require.NoError(t, err)
	after := fmt.Sprintf("%0*d", len(next), n+1)
	require.NoError(t, os.WriteFile(filepath.Join(checkout, migrations, after+"_drop_guide_attempts.sql"), []byte(guideDestructiveMigration), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(checkout, migrations, after+"_drop_guide_attempts.expect.json"), []byte(guideDestructiveDeclaration), 0o644))
	// Step 1: what it drops leaves SECURITY.md's table.
	unclearColumn(t, checkout, "pending_outbound_message", ", `guide_attempts`")
	steps()
	fixture = read("fixtures/version" + after + "/fixture.sql")
	models = read("internal/db/models.go")
	require.NotContains(t, fixture, `"guide_attempts"`)
	require.NotContains(t, models, "GuideAttempts", "sqlc regenerated the models without the column")
	for _, want := range guideKept.fixture {
		require.Contains(t, fixture, want, "the new table and columns stay at the new head")
	}
	for _, want := range guideKept.models {
		require.Contains(t, models, want, "the new table and columns stay at the new head")
	}

	// Both modules' tests, at the new head: a layout that is not today's.
	t0 = time.Now()
	run(0, "go", "test", "./...")
	phase("go test ./... at the new head", t0)
	t0 = time.Now()
	run(0, "go", "-C", "cmd", "test", "./...")
	phase("go -C cmd test ./... at the new head", t0)
	phase("the guide test", start)
}

// copyCheckout copies the files of the git checkout at root that git
// tracks or would track (untracked, not ignored), as they are on disk, to
// a new temporary directory, and returns it. A tracked file deleted on
// disk is left out.
func copyCheckout(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	require.NoError(t, err, "git ls-files in %s", root)
	dst := t.TempDir()
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, filepath.FromSlash(name))
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		to := filepath.Join(dst, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			require.NoError(t, err)
			require.NoError(t, os.Symlink(target, to))
			continue
		}
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, b, fi.Mode().Perm()))
	}
	return dst
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clearColumns edits SECURITY.md's table of columns in the clear in the
// checkout as the guide's step 1 says: each table's row gets the columns
// added (appended to the row's list), and rows are added for new tables.
func clearColumns(t *testing.T, checkout string, added map[string]string, rows ...string) {
	t.Helper()
	path := filepath.Join(checkout, "SECURITY.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	head := slices.Index(lines, "| table | columns in the clear |")
	require.GreaterOrEqual(t, head, 0, "SECURITY.md's table of columns in the clear")
	end := head + 2 // after the header and its separator
	for ; end < len(lines) && strings.HasPrefix(lines[end], "| "); end++ {
		for table, cols := range added {
			if strings.HasPrefix(lines[end], "| `"+table+"` | ") {
				lines[end] = strings.TrimSuffix(lines[end], " |") + cols + " |"
				delete(added, table)
			}
		}
	}
	require.Empty(t, added, "rows of SECURITY.md's table of columns in the clear")
	lines = slices.Insert(lines, end, rows...)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
}

// unclearColumn removes cols from table's row of SECURITY.md's table of
// columns in the clear in the checkout.
func unclearColumn(t *testing.T, checkout, table, cols string) {
	t.Helper()
	path := filepath.Join(checkout, "SECURITY.md")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(l, "| `"+table+"` | ") && strings.Contains(l, cols) {
			lines[i], found = strings.Replace(l, cols, "", 1), true
		}
	}
	require.True(t, found, "%s's row names %s", table, cols)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
}
