package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
)

// TestMemoryDBRefused: -db :memory: (or a URI) names no file; every
// command refuses it with a usage error and creates nothing.
func TestMemoryDBRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, db := range []string{":memory:", "file::memory:", "file:client.db?mode=memory"} {
		for _, cmd := range []string{"up", "status", "plan", "drift", "freeze"} {
			code, stdout, stderr := runCmd(t, cmd, "-db", db)
			require.Equal(t, exitError, code, "%s %s: %s", cmd, db, stderr)
			require.NotContains(t, stdout, "applied")
			require.Contains(t, stderr, "-db "+db+" is not a database file: give the file's path")
		}
	}
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	require.Empty(t, entries, "nothing created")
}

// TestDanglingSymlink: a -db that is a symbolic link to nothing is named
// as such, by up (which creates nothing) and by the read-only commands.
func TestDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "gone.db")
	link := filepath.Join(dir, "client.db")
	require.NoError(t, os.Symlink(target, link))
	for _, cmd := range []string{"up", "status", "drift"} {
		code, _, stderr := runCmd(t, cmd, "-db", link)
		require.Equal(t, exitError, code, cmd)
		require.Equal(t, "migrate: "+cmd+": "+link+" is a symbolic link to "+target+", which does not exist: nothing created\n", stderr)
		require.NotContains(t, stderr, "file exists")
	}
	require.NoFileExists(t, target)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the link")
}

// TestUpAtHeadWritesNothing runs up on a head database while another
// connection holds its write lock (as a read-only file would refuse a
// write): nothing to do is success, reported at once, and the file is
// unchanged. A database with work to do still needs the write.
func TestUpAtHeadWritesNothing(t *testing.T) {
	path := headDB(t)
	writer, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=100")
	require.NoError(t, err)
	defer writer.Close()
	writer.SetMaxOpenConns(1)
	tx, err := writer.Begin()
	require.NoError(t, err)
	_, err = tx.Exec("CREATE TABLE held (x)") // takes the write lock
	require.NoError(t, err)
	defer tx.Rollback()
	before := snapshot(t, filepath.Dir(path))

	code, stdout, stderr := runCmd(t, "up", "-db", path)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, expand(t, "already at version {head}\n"), stdout)
	require.Empty(t, stderr)
	code, stdout, stderr = runCmd(t, "up", "-db", path, "-json")
	require.Equal(t, exitOK, code, stderr)
	doc := decode[upDoc](t, stdout)
	require.Equal(t, upDoc{docHeader: docHeader{Command: "up", Migrations: "schema/migrations", DB: path, Head: headVersion(t), OK: true}, Current: headVersion(t), Applied: []string{}, verifyFields: noDifferences}, doc)
	require.Equal(t, before, snapshot(t, filepath.Dir(path)), "up at head changed the directory")
}

// noDifferences is the verifyFields of a document whose database is what
// its history says.
var noDifferences = verifyFields{Differences: []pipeline.Difference{}, History: []pipeline.HistoryDrift{}}

// TestUpJSON: up -json writes one document: created or not, the version
// found, what it applied; a refusal keeps the fields and prints no text.
func TestUpJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	code, stdout, stderr := runCmd(t, "up", "-db", path, "-json")
	require.Equal(t, exitOK, code, stderr)
	require.JSONEq(t, `{"command":"up","migrations":"schema/migrations","db":`+jsonString(path)+`,"head":"`+headVersion(t)+`","ok":true,"created":true,"current":"","applied":`+jsonStrings(allVersions(t))+`,"differences":[],"history":[]}`, stdout)

	v14 := v14DB(t)
	code, stdout, stderr = runCmd(t, "up", "-db", v14, "-json")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, upDoc{docHeader: docHeader{Command: "up", Migrations: "schema/migrations", DB: v14, Head: headVersion(t), OK: true}, Current: "14", Applied: allVersions(t)[1:], verifyFields: noDifferences}, decode[upDoc](t, stdout))

	drifted := headDB(t, "DROP INDEX pending_outbound_message_recipient")
	before := snapshot(t, filepath.Dir(drifted))
	code, stdout, stderr = runCmd(t, "up", "-db", drifted, "-json")
	require.Equal(t, exitFinding, code, stderr)
	doc := decode[upDoc](t, stdout)
	require.False(t, doc.OK)
	require.Equal(t, drifted+" is not what its history says (version "+headVersion(t)+"): 1 schema difference(s), 0 history row(s); up refuses it, nothing applied", doc.Error,
		"one dropped index is one difference, not the statements that would fix it")
	require.Equal(t, headVersion(t), doc.Current, "the version found")
	require.Len(t, doc.Differences, 1)
	require.Equal(t, "pending_outbound_message_recipient", doc.Differences[0].Name)
	require.Equal(t, []pipeline.HistoryDrift{}, doc.History)
	require.Equal(t, []string{}, doc.Applied)
	require.False(t, strings.HasPrefix(stdout, "--"), "no text report with -json")
	require.Equal(t, before, snapshot(t, filepath.Dir(drifted)))
}

// TestFreezeRefusesNoRows: a head database holding nothing but its
// history would make a fixture that proves nothing: freeze refuses it and
// writes nothing.
func TestFreezeRefusesNoRows(t *testing.T) {
	src := headDB(t)
	parent := t.TempDir()
	code, _, stderr := runCmd(t, "freeze", "-db", src, "-out", filepath.Join(parent, "version"+headVersion(t)))
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "holds no rows outside the migration history (a fixture of it would prove nothing)")
	require.Empty(t, snapshot(t, parent))
}
