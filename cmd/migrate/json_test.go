package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/migration/pipeline"
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
	require.Equal(t, "migrate: status: 1 version(s) pending (15): run up\n", stderr)
	doc := decode[statusDoc](t, stdout)
	require.Equal(t, statusDoc{
		docHeader: docHeader{Command: "status", Migrations: "embedded", DB: doc.DB, Head: "15", Error: "1 version(s) pending (15): run up"},
		Current:   "14", Pending: []string{"15"}, OutOfOrder: []string{},
	}, doc)

	code, stdout, _ = runCmd(t, "status", "-db", headDB(t), "-json")
	require.Equal(t, 0, code)
	require.JSONEq(t, `{"command":"status","migrations":"embedded","db":`+jsonString(decode[statusDoc](t, stdout).DB)+`,"ok":true,"current":"15","head":"15","pending":[],"out_of_order":[]}`, stdout)

	// An error is one document too, with the fields a success has, the
	// error, and exit 2.
	missing := filepath.Join(t.TempDir(), "missing.db")
	code, stdout, stderr = runCmd(t, "status", "-db", missing, "-json")
	require.Equal(t, 2, code)
	require.JSONEq(t, `{"command":"status","migrations":"embedded","db":`+jsonString(missing)+`,"ok":false,"head":"15","error":`+jsonString(missing+": no such database file")+`,"current":"","pending":[],"out_of_order":[]}`, stdout)
	require.Equal(t, "migrate: status: "+missing+": no such database file\n", stderr)
}

func TestPlanJSON(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "plan", "-db", filepath.Join(dir, "new.db"), "-json")
	require.Equal(t, 1, code, "pending versions are a finding: %s", stderr)
	doc := decode[planDoc](t, stdout)
	require.False(t, doc.OK)
	require.Equal(t, "2 version(s) pending (14 15): run up", doc.Error)
	require.False(t, doc.Exists)
	require.Equal(t, "", doc.Current)
	require.Equal(t, "15", doc.Head)
	require.Len(t, doc.Versions, 2)
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
	require.Equal(t, "15", doc.Current)
	require.Equal(t, []planVersion{}, doc.Versions)
}

func TestLintJSON(t *testing.T) {
	queries, err := pipeline.ReadQueries(filepath.Join(repo, "internal", "db"), "queries")
	require.NoError(t, err)
	code, stdout, stderr := runCmd(t, "lint", "-json")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, fmt.Sprintf(`{"command":"lint","migrations":"embedded","head":"15","ok":true,"files":2,"baseline":"14","blocking":0,"query_plans":%d,"findings":[]}`, len(queries)), stdout)

	dir := writeDir(t, withFiles(t, map[string]string{"16_drop_session.sql": "DROP TABLE session;\n"}))
	code, stdout, stderr = runCmd(t, "lint", "-dir", dir, "-json")
	require.Equal(t, 1, code)
	doc := decode[lintDoc](t, stdout)
	require.Equal(t, fmt.Sprintf("migrate: lint: %d finding(s) in versions above 14\n", len(doc.Findings)), stderr)
	require.False(t, doc.OK)
	require.Equal(t, 3, doc.Files)
	require.Equal(t, len(doc.Findings), doc.Blocking)
	require.Equal(t, pipeline.Finding{Version: "16", File: "16_drop_session.sql", Line: 1, Analyzer: "destructive", Code: "DS102", Text: `Dropping table "session"`, Blocking: true}, doc.Findings[0])
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
	require.Contains(t, stdout, "schema/migrations/atlas.sum is up to date (2 files)")
	after, err := os.ReadFile(filepath.Join("..", "schema", "migrations", "atlas.sum"))
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
