package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/frozen"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/schema"
)

// copyMigrations copies the embedded migration directory into a new
// temporary directory, adds files, and returns it (atlas.sum not rehashed).
func copyMigrations(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := fs.ReadDir(schema.Migrations(), schema.MigrationsDir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := fs.ReadFile(schema.Migrations(), schema.MigrationsDir+"/"+e.Name())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	for name, content := range expandNames(t, files) {
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

// guide returns the "Adding a migration" section of the pipeline guide,
// cmd/migrate/README.md.
func guide(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "\n## Adding a migration\n")
	require.GreaterOrEqual(t, i, 0, `no "## Adding a migration" section in the pipeline guide`)
	s = s[i+1:]
	if j := strings.Index(s[1:], "\n#"); j >= 0 {
		s = s[:j+1]
	}
	return s
}

// guideStep is one command of the guide's numbered steps, in order.
type guideStep struct {
	text string   // as the guide writes it
	args []string // migrate's arguments; nil for another tool's command
}

var (
	stepItem     = regexp.MustCompile(`(?m)^([0-9]+)\. `)
	codeSpan     = regexp.MustCompile("`([^`]+)`")
	migrateShell = regexp.MustCompile(`(?:^|[\s/])migrate ([a-z-]+)((?: [^ ]+)*)$`)
)

// guideSteps returns the commands of the numbered steps of the section,
// in order: every code span that runs migrate (however the guide invokes
// it: go run, go tool or a built binary) or that starts with "go ".
func guideSteps(t *testing.T, section string) []guideStep {
	t.Helper()
	items := stepItem.FindAllStringIndex(section, -1)
	require.NotEmpty(t, items, "the guide numbers its steps")
	list := section[items[0][0]:]
	if end := strings.Index(list, "\n\n"); end >= 0 {
		list = list[:end]
	}
	// Code spans may wrap: join the lines first.
	list = strings.Join(strings.Fields(list), " ")
	var steps []guideStep
	for _, m := range codeSpan.FindAllStringSubmatch(list, -1) {
		span := m[1]
		if mm := migrateShell.FindStringSubmatch(span); mm != nil && slices.ContainsFunc(commands, func(c *command) bool { return c.name == mm[1] }) {
			steps = append(steps, guideStep{text: span, args: append([]string{mm[1]}, strings.Fields(mm[2])...)})
			continue
		}
		if strings.HasPrefix(span, "go ") {
			steps = append(steps, guideStep{text: span})
		}
	}
	return steps
}

// newCheckout makes a temporary checkout of the module holding what the
// guide's commands read and write: go.mod, schema/migrations (the embedded
// directory), the frozen fixtures, the generated internal/db and the
// legacy schema (lint's query plans and plans read them), and queries/
// and schema/ for the generated documents. The repository itself is never written.
func newCheckout(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n"), 0o644))
	migrations := filepath.Join(root, "schema", "migrations")
	require.NoError(t, os.MkdirAll(migrations, 0o755))
	entries, err := fs.ReadDir(schema.Migrations(), schema.MigrationsDir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := fs.ReadFile(schema.Migrations(), schema.MigrationsDir+"/"+e.Name())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(migrations, e.Name()), b, 0o644))
	}
	copyVersion14(t, filepath.Join(root, "fixtures", "version14"), nil)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "queries"), 0o755))
	for _, dir := range []string{"internal/db", "schema/legacy"} {
		src := filepath.Join(repo, filepath.FromSlash(dir))
		require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repo, p)
			dst := filepath.Join(root, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			b, err := os.ReadFile(p)
			if err == nil {
				err = os.WriteFile(dst, b, 0o644)
			}
			return err
		}))
	}
	return root
}

// TestAddingAMigration walks the pipeline guide's "Adding a migration"
// steps as the guide writes them, for four kinds of next version and an
// undeclared backfill, each in its own temporary checkout: the hand steps
// (write NN_description.sql, and NN_description.expect.json for a
// backfill) and then every command of the steps in order, verbatim, with
// "-dir schema/migrations" as the guide says a prebuilt binary needs
// (sqlc's generate is not run: the queries do not change). Each
// ends with the new fixture frozen by freeze and proved, with the
// version-14 one, by fixture-test; the undeclared backfill fails
// fixture-test naming table, row and column, and freeze refuses it.
func TestAddingAMigration(t *testing.T) {
	section := guide(t)
	for _, file := range []string{"schema/migrations/NN_description.sql", "schema/migrations/NN_description.expect.json"} {
		require.Contains(t, section, "`"+file+"`", "the hand steps the test performs")
	}
	steps := guideSteps(t, section)
	var names []string
	for _, s := range steps {
		if s.args == nil {
			require.Contains(t, s.text, "sqlc generate", "a command of the guide this test does not know")
			continue
		}
		names = append(names, s.args[0])
	}
	require.Equal(t, []string{"hash", "lint", "plan", "plans", "schema-doc", "fixture-test", "freeze"}, names,
		"the guide's migrate commands, in order: review this test when they change")

	for _, tt := range []struct {
		name, sql, declared string
		// fail is the step that exits 1 (then every later step is
		// checked to refuse too), and what it says.
		fail, says string
		row        string // in the new fixture's fixture.sql
	}{
		{name: "nullable column", sql: "ALTER TABLE session ADD COLUMN last_seen INTEGER;\n", row: `"last_seen") VALUES ('bob', 1, X'`},
		{name: "column with a default", sql: "ALTER TABLE session ADD COLUMN flags INTEGER NOT NULL DEFAULT 0;\n", row: `"flags") VALUES ('bob', 1, X'`},
		{name: "table rebuild keeping its rows", sql: pinRebuild(t), row: `"verified_at") VALUES ('carol', 3, X'`},
		{name: "declared backfill", sql: sessionBackfill, declared: sessionBackfillDeclared, row: `"last_seen") VALUES ('bob', 2, X'`},
		{
			name: "undeclared backfill", sql: sessionBackfill, fail: "fixture-test",
			says: "FAIL every column kept keeps its value, unless a change is declared: table session, row (user_id='bob', device_id=1), column last_seen (added): holds 10, not its declared default NULL",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := newCheckout(t)
			t.Chdir(root)
			migrations := filepath.Join("schema", "migrations")
			require.NoError(t, os.WriteFile(filepath.Join(migrations, nextFile(t, "session_change")), []byte(tt.sql), 0o644))
			if tt.declared != "" {
				require.NoError(t, os.WriteFile(filepath.Join(migrations, nextVersion(t)+"_session_change.expect.json"), []byte(tt.declared), 0o644))
			}
			failed := false
			for _, s := range steps {
				if s.args == nil {
					continue
				}
				args := append(slices.Clone(s.args), "-dir", migrations)
				code, stdout, stderr := runCmd(t, args...)
				want := 0
				switch {
				case s.args[0] == "plan":
					want = exitFinding // a version is pending on pending.db
				case s.args[0] == tt.fail:
					failed = true
					want = exitFinding
					require.Contains(t, stdout, tt.says)
				case failed:
					// freeze proves the fixture first: it refuses too.
					want = exitFinding
				}
				require.Equal(t, want, code, "%s\nstdout:\n%s\nstderr:\n%s", s.text, stdout, stderr)
			}
			require.NoFileExists(t, "pending.db", "plan creates nothing")
			if tt.fail != "" {
				require.NoDirExists(t, filepath.Join("fixtures", "version"+nextVersion(t)))
				return
			}
			fixture, err := os.ReadFile(filepath.Join("fixtures", "version"+nextVersion(t), frozen.FixtureFile))
			require.NoError(t, err)
			require.Contains(t, string(fixture), tt.row)
			plans, err := os.ReadFile(filepath.Join("queries", "PLANS.md"))
			require.NoError(t, err)
			require.Contains(t, string(plans), expand(t, "# Query plans (schema version {next},"))
			doc, err := os.ReadFile(filepath.Join("schema", "SCHEMA.md"))
			require.NoError(t, err)
			require.Contains(t, string(doc), expand(t, "# Schema reference (version {next})"))

			// From then on, fixture-test proves both fixtures at the new head.
			out := mustRun(t, 0, "fixture-test", "-dir", migrations)
			require.Contains(t, out, "== "+filepath.Join("fixtures", "version14")+" (version 14)\n")
			require.Contains(t, out, expand(t, "== "+filepath.Join("fixtures", "version{next}")+" (version {next})\n"))
			require.Contains(t, out, expand(t, "ok   migrate to head {next}: exactly the versions above {next} applied []"))
			require.NotContains(t, out, "FAIL")
			// Without -dir, the checkout's directory on disk is read.
			mustRun(t, 0, "fixture-test")
		})
	}
}

// pinRebuild returns a migration rebuilding identity_pin as SQLite
// changes a table, keeping its rows and every column, constraint and
// index it has at head, and adding a column with a default (verified_at,
// after its last column).
func pinRebuild(t *testing.T) string {
	t.Helper()
	pin := migrationtest.HeadTable(t, "identity_pin")
	columns := pin.ColumnList()
	return strings.Join(append([]string{
		migrationtest.Create("new_identity_pin", pin.WithColumn("verified_at INTEGER NOT NULL DEFAULT 0")),
		"INSERT INTO new_identity_pin (" + columns + ") SELECT " + columns + " FROM identity_pin",
		"DROP TABLE identity_pin",
		"ALTER TABLE new_identity_pin RENAME TO identity_pin",
	}, pin.Objects...), ";\n") + ";\n"
}

// sessionBackfill adds a column and fills it from existing data.
const sessionBackfill = "ALTER TABLE session ADD COLUMN last_seen INTEGER;\nUPDATE session SET last_seen = device_id * 10;\n"

// sessionBackfillDeclared declares what sessionBackfill writes into the
// version-14 fixture's two sessions.
const sessionBackfillDeclared = `{"fixtures": {"14": {"session": [
  {"key": {"user_id": "bob", "device_id": 1}, "set": {"last_seen": 10}},
  {"key": {"user_id": "bob", "device_id": 2}, "set": {"last_seen": 20}}
]}}}
`

// TestAddingADestructiveMigration adds a v16 that drops a table: lint
// flags it, naming the file and the analyzer, and exits 1.
func TestAddingADestructiveMigration(t *testing.T) {
	dir := copyMigrations(t, map[string]string{"{next}_drop_session.sql": "DROP TABLE session;\n"})
	mustRun(t, 0, "hash", "-dir", dir)
	code, stdout, stderr := runCmd(t, "lint", "-dir", dir)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, expand(t, `{next} {next}_drop_session.sql: destructive: Dropping table "session" [DS102, line 1]`))
	require.Contains(t, stderr, "finding(s) in versions above 14")
}
