package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"ariga.io/atlas/sql/migrate"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
)

// A drift difference in a table a later migration rebuilt points at that
// migration, at the CREATE TABLE of the copy it renames to the table, in
// -format gcc and github alike.
func TestDriftLocationOfRebuiltTable(t *testing.T) {
	next := nextVersion(t)
	name := next + "_pin_rebuild.sql"
	dir := copyMigrations(t, map[string]string{name: "-- identity_pin gains verified_at.\n" + pinRebuild(t)})
	mustRun(t, 0, "hash", "-dir", dir)
	db := filepath.Join(t.TempDir(), "client.db")
	mustRun(t, 0, "up", "-db", db, "-dir", dir)
	conn, err := sql.Open("sqlite3", "file:"+db)
	require.NoError(t, err)
	_, err = conn.Exec("ALTER TABLE identity_pin ADD COLUMN extra TEXT")
	require.NoError(t, err)
	require.NoError(t, conn.Close())

	file := filepath.Join(dir, name)
	code, stdout, stderr := runCmd(t, "drift", "-db", db, "-dir", dir, "-format", "gcc")
	require.Equal(t, exitFinding, code, stderr)
	require.Equal(t, file+":2:1: error: table identity_pin: column extra is in the database, not at head: TEXT\n", stdout)
	code, stdout, stderr = runCmd(t, "drift", "-db", db, "-dir", dir, "-format", "github")
	require.Equal(t, exitFinding, code, stderr)
	require.Equal(t, "::error file="+escapeProperty(file)+",line=2,col=1::table identity_pin: column extra is in the database, not at head: TEXT\n", stdout)
}

// definedAt finds the newest statement that defines a name: its CREATE,
// an ALTER TABLE of it, or a rebuild's CREATE of the copy renamed to it;
// quoting and case do not matter, and a column or a table a statement only
// reads is no definition.
func TestDefinedAt(t *testing.T) {
	files := []migrate.File{
		migrate.NewLocalFile("1_first.sql", []byte("CREATE TABLE scratch (a);\nCREATE TABLE other (x);\nCREATE INDEX scratch_a ON scratch (a);\n")),
		migrate.NewLocalFile("2_later.sql", []byte("INSERT INTO \"Scratch\" VALUES (1);\n\nALTER TABLE scratch ADD COLUMN b TEXT;\nCREATE TABLE new_other (x);\nDROP TABLE other;\nALTER TABLE new_other RENAME TO \"other\";\n")),
	}
	for _, tt := range []struct {
		name, file string
		line       int
	}{
		{"scratch", "2_later.sql", 3},
		{"SCRATCH", "2_later.sql", 3},
		{"other", "2_later.sql", 4},
		{"scratch_a", "1_first.sql", 3},
		{"b", "", 0},
		{"no_such_thing", "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file, line := definedAt(files, tt.name)
			require.Equal(t, tt.file, file)
			require.Equal(t, tt.line, line)
		})
	}
}

// SL106 points at the INSERT that copies only some rows, not at the
// rebuild's first line.
func TestRowsFilteredLine(t *testing.T) {
	next := nextVersion(t)
	rebuild := strings.Replace(pinRebuild(t), "FROM identity_pin;", "FROM identity_pin WHERE device_id > 0;", 1)
	line := strings.Count(rebuild[:strings.Index(rebuild, "INSERT")], "\n") + 1
	require.Greater(t, line, 1)
	dir := copyMigrations(t, map[string]string{next + "_pin.sql": rebuild})
	mustRun(t, 0, "hash", "-dir", dir)
	code, stdout, stderr := runCmd(t, "lint", "-dir", dir, "-json")
	require.Equal(t, exitFinding, code, stderr)
	var got []string
	for _, f := range decode[lintDoc](t, stdout).Findings {
		if f.Code == pipeline.CodeRowsFiltered {
			got = append(got, fmt.Sprintf("%s:%d", f.File, f.Line))
		}
	}
	require.Equal(t, []string{fmt.Sprintf("%s_pin.sql:%d", next, line)}, got)
}
