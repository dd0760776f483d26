package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// decode parses stdout as exactly one JSON document.
func decode[T any](t *testing.T, stdout string) T {
	t.Helper()
	dec := json.NewDecoder(stringsReader(stdout))
	dec.DisallowUnknownFields()
	var v T
	require.NoError(t, dec.Decode(&v), stdout)
	require.False(t, dec.More(), "more than one document: %s", stdout)
	return v
}

func TestStatusJSON(t *testing.T) {
	// A pending version is a finding: exit 1, ok false.
	code, stdout, stderr := runCmd(t, "status", "-db", v14DB(t), "-json")
	require.Equal(t, 1, code, stderr)
	above := allVersions(t)[1:]
	pending := fmt.Sprintf("%d version(s) pending (%s): run up", len(above), strings.Join(above, " "))
	require.Equal(t, "migrate: status: "+pending+"\n", stderr)
	doc := decode[statusDoc](t, stdout)
	require.Equal(t, statusDoc{
		docHeader: docHeader{Command: "status", Migrations: "schema/migrations", DB: doc.DB, Head: headVersion(t), Error: pending},
		Current:   "14", Pending: above, OutOfOrder: []string{},
	}, doc)

	code, stdout, _ = runCmd(t, "status", "-db", headDB(t), "-json")
	require.Equal(t, 0, code)
	require.JSONEq(t, `{"command":"status","migrations":"schema/migrations","db":`+jsonString(decode[statusDoc](t, stdout).DB)+`,"ok":true,"current":"`+headVersion(t)+`","head":"`+headVersion(t)+`","pending":[],"out_of_order":[]}`, stdout)

	// An error is one document too, with the fields a success has, the
	// error, and exit 2.
	missing := filepath.Join(t.TempDir(), "missing.db")
	code, stdout, stderr = runCmd(t, "status", "-db", missing, "-json")
	require.Equal(t, 2, code)
	require.JSONEq(t, `{"command":"status","migrations":"schema/migrations","db":`+jsonString(missing)+`,"ok":false,"head":"`+headVersion(t)+`","error":`+jsonString(missing+": no such database file")+`,"current":"","pending":[],"out_of_order":[]}`, stdout)
	require.Equal(t, "migrate: status: "+missing+": no such database file\n", stderr)
}

func TestPlanJSON(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "plan", "-db", filepath.Join(dir, "new.db"), "-json")
	require.Equal(t, 1, code, "pending versions are a finding: %s", stderr)
	doc := decode[planDoc](t, stdout)
	require.False(t, doc.OK)
	versions := allVersions(t)
	require.Equal(t, fmt.Sprintf("%d version(s) pending (%s): run up", len(versions), strings.Join(versions, " ")), doc.Error)
	require.False(t, doc.Exists)
	require.Equal(t, "", doc.Current)
	require.Equal(t, headVersion(t), doc.Head)
	require.Len(t, doc.Versions, len(versions))
	require.Equal(t, "14", doc.Versions[0].Version)
	require.Equal(t, "baseline", doc.Versions[0].Description)
	require.Len(t, doc.Versions[0].Statements, 8)
	require.Equal(t, "15", doc.Versions[1].Version)
	require.Len(t, doc.Versions[1].Statements, 1)
	require.Empty(t, snapshot(t, dir))

	code, stdout, _ = runCmd(t, "plan", "-db", headDB(t), "-json")
	require.Equal(t, 0, code)
	doc = decode[planDoc](t, stdout)
	require.True(t, doc.OK)
	require.Empty(t, doc.Error)
	require.True(t, doc.Exists)
	require.Equal(t, headVersion(t), doc.Current)
	require.Equal(t, []planVersion{}, doc.Versions)
}

func TestLintJSON(t *testing.T) {
	queries, err := pipeline.ReadQueries(filepath.Join(repo, "internal", "db"), "queries")
	require.NoError(t, err)
	code, stdout, stderr := runCmd(t, "lint", "-json")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, fmt.Sprintf(`{"command":"lint","migrations":"schema/migrations","head":%q,"ok":true,"files":%d,"baseline":"14","blocking":0,"query_plans":%d,"findings":[]}`, headVersion(t), len(allVersions(t)), len(queries)), stdout)

	dir := writeDir(t, withFiles(t, map[string]string{"{next}_drop_session.sql": "DROP TABLE session;\n"}))
	code, stdout, stderr = runCmd(t, "lint", "-dir", dir, "-json")
	require.Equal(t, 1, code)
	doc := decode[lintDoc](t, stdout)
	require.Equal(t, fmt.Sprintf("migrate: lint: %d finding(s) in versions above 14\n", len(doc.Findings)), stderr)
	require.False(t, doc.OK)
	require.Equal(t, len(allVersions(t))+1, doc.Files)
	require.Equal(t, len(doc.Findings), doc.Blocking)
	require.Equal(t, pipeline.Finding{Version: nextVersion(t), File: nextFile(t, "drop_session"), Line: 1, Analyzer: "destructive", Code: "DS102", Text: `Dropping table "session"`, Blocking: true}, doc.Findings[0])
	// Every query that reads session no longer prepares.
	require.Greater(t, len(doc.Findings), 1)
	for _, f := range doc.Findings[1:] {
		require.Equal(t, "queryplans", f.Analyzer, f.Text)
		require.Equal(t, pipeline.CodePlanWorse, f.Code)
		require.Contains(t, f.Text, "no longer prepares (no such table: session)")
	}
}

func TestLintAndHashMissingDirectory(t *testing.T) {
	nope := filepath.Join(t.TempDir(), "nope")
	for _, cmd := range []string{"lint", "hash"} {
		code, _, stderr := runCmd(t, cmd, "-dir", nope)
		require.Equal(t, 2, code)
		require.Equal(t, "migrate: "+cmd+": "+nope+": directory does not exist\n", stderr)
	}
	require.NoDirExists(t, nope)
}

// TestHashDefaultIsTheRepository runs hash with no -dir from a
// subdirectory of the checkout: it checks the repository's directory, not
// one relative to the working directory.
func TestHashDefaultIsTheRepository(t *testing.T) {
	t.Chdir(filepath.Join(repo, "queries"))
	before, err := os.ReadFile(filepath.Join("..", "schema", "migrations", "atlas.sum"))
	require.NoError(t, err)
	code, stdout, stderr := runCmd(t, "hash")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, fmt.Sprintf("schema/migrations/atlas.sum is up to date (%d files)", len(allVersions(t))))
	after, err := os.ReadFile(filepath.Join("..", "schema", "migrations", "atlas.sum"))
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// TestJSONEveryCommand runs every command with -json three ways: one that
// succeeds, one that fails with an error and one that is a usage error.
// Each writes exactly one JSON document on stdout, with the fields of the
// success ("error" added), ok true exactly when it exits 0; "migrations"
// names the directory also when reading it failed.
func TestJSONEveryCommand(t *testing.T) {
	nope := filepath.Join(t.TempDir(), "nope")
	dirCopy := writeDir(t, withFiles(t, nil))
	type run struct {
		args []string
		want int
	}
	cases := map[string]struct{ ok, fail, usage run }{
		"up":           {run{[]string{"-db", filepath.Join(t.TempDir(), "new.db")}, 0}, run{[]string{"-db", t.TempDir()}, 2}, run{nil, 2}},
		"status":       {run{[]string{"-db", headDB(t)}, 0}, run{[]string{"-db", nope}, 2}, run{nil, 2}},
		"plan":         {run{[]string{"-db", headDB(t)}, 0}, run{[]string{"-db", t.TempDir()}, 2}, run{[]string{"-db", ":memory:"}, 2}},
		"drift":        {run{[]string{"-db", headDB(t)}, 0}, run{[]string{"-db", nope}, 2}, run{[]string{"-bogus"}, 2}},
		"verify":       {run{[]string{"-db", headDB(t)}, 0}, run{[]string{"-db", nope}, 2}, run{nil, 2}},
		"lint":         {run{nil, 0}, run{[]string{"-dir", nope}, 2}, run{[]string{"-bogus"}, 2}},
		"plans":        {run{[]string{"-out", filepath.Join(t.TempDir(), "PLANS.md")}, 0}, run{[]string{"-dir", nope}, 2}, run{[]string{"extra"}, 2}},
		"schema-doc":   {run{[]string{"-out", filepath.Join(t.TempDir(), "SCHEMA.md")}, 0}, run{[]string{"-dir", nope}, 2}, run{[]string{"-bogus"}, 2}},
		"hash":         {run{[]string{"-dir", dirCopy}, 0}, run{[]string{"-dir", nope}, 2}, run{[]string{"extra"}, 2}},
		"fixture-test": {run{nil, 0}, run{[]string{"-fixtures", nope}, 2}, run{[]string{"-bogus"}, 2}},
		"freeze": {
			run{[]string{"-fixtures", func() string {
				f := t.TempDir()
				copyVersion14(t, filepath.Join(f, "version14"), nil)
				return f
			}()}, 0},
			run{[]string{"-fixtures", nope}, 2}, run{[]string{"-db", ":memory:"}, 2},
		},
	}
	require.Len(t, cases, len(commands), "every command")
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			tc, ok := cases[c.name]
			require.True(t, ok)
			docs := map[string]map[string]any{}
			for kind, r := range map[string]run{"ok": tc.ok, "fail": tc.fail, "usage": tc.usage} {
				// -json first for some, last for others: a usage error
				// before it is parsed still writes JSON.
				args := append([]string{c.name, "-json"}, r.args...)
				if kind == "usage" {
					args = append(append([]string{c.name}, r.args...), "-json")
				}
				code, stdout, stderr := runCmd(t, args...)
				require.Equal(t, r.want, code, "%v\nstdout:\n%s\nstderr:\n%s", args, stdout, stderr)
				doc := decode[map[string]any](t, stdout)
				require.Equal(t, c.name, doc["command"], kind)
				require.Equal(t, code == 0, doc["ok"], kind)
				if code != 0 {
					require.NotEmpty(t, doc["error"], kind)
					require.Contains(t, stderr, doc["error"], "the line on stderr, %s", kind)
				}
				docs[kind] = doc
			}
			keys := func(doc map[string]any) []string {
				var out []string
				for k := range doc {
					if k != "error" && k != "db" {
						out = append(out, k)
					}
				}
				slices.Sort(out)
				return out
			}
			require.Equal(t, keys(docs["ok"]), keys(docs["fail"]), "an error has the fields of a success")
			require.Equal(t, keys(docs["ok"]), keys(docs["usage"]), "a usage error has the fields of a success")
			if slices.Contains(tc.fail.args, "-dir") {
				require.Equal(t, nope, docs["fail"]["migrations"], "the directory that failed")
			}
			row := shapeRow(t, c.name)
			for _, k := range append(keys(docs["ok"]), "error") {
				require.Contains(t, row, `"`+k+`"`, "the guide's shape of %s names field %s", c.name, k)
			}
		})
	}
}

// shapeRow returns the row of the guide's table of JSON documents whose
// first cell names command.
func shapeRow(t *testing.T, command string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		first, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		if ok && strings.HasPrefix(line, "| `") && slices.Contains(strings.Split(first, ", "), "`"+command+"`") {
			return line
		}
	}
	t.Fatalf("the guide has no JSON shape for %s", command)
	return ""
}

// An unknown command under -json (also -json given as the command) is a
// usage error with a document naming what was given.
func TestJSONUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"frobnicate", "-json"}, {"-json"}} {
		code, stdout, stderr := runCmd(t, args...)
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, "unknown command")
		doc := decode[map[string]any](t, stdout)
		require.Equal(t, args[0], doc["command"])
		require.Equal(t, false, doc["ok"])
		require.Equal(t, fmt.Sprintf("unknown command %q", args[0]), doc["error"])
	}
}

// status -json on a database newer than this build names, as current,
// the newest version its history records: a pipeline sees which release
// wrote it, not an empty version.
// status, plan and up (each -json) on a database newer than this build
// name, as current, the newest version its history records: a pipeline
// sees which release wrote it, not an empty version, whichever command it
// ran.
func TestJSONNewerDatabaseCurrent(t *testing.T) {
	for _, command := range []string{"status", "plan", "up"} {
		t.Run(command, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, command, "-db", headWithFuture()(t), "-json")
			require.Equal(t, exitError, code, stderr)
			var doc struct {
				OK      bool   `json:"ok"`
				Error   string `json:"error"`
				Current string `json:"current"`
			}
			require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
			require.False(t, doc.OK)
			require.Equal(t, migrationtest.Next(t), doc.Current)
			require.Contains(t, doc.Error, "newer")
		})
	}
}
