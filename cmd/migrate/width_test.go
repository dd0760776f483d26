package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMixedWidthVersions adds 9_nine.sql beside 14 and 15 with the
// atlas.sum Atlas computes for it (files by name: 14, 15, 9). Every
// command refuses the directory with one message that says what is true,
// the widths, exit 2, and none calls the unchanged file added; nothing
// is written.
func TestMixedWidthVersions(t *testing.T) {
	const want = "migration: malformed migration directory: versions 9 (9_nine.sql) and 14 (14_baseline.sql) differ in width: " +
		"Atlas orders migration files by name, so 9_nine.sql would sort after 14_baseline.sql; give every version the same number of digits"
	dir := writeDir(t, withFiles(t, map[string]string{"9_nine.sql": "CREATE TABLE nine (id INTEGER PRIMARY KEY);\n"}))
	db := headDB(t)
	out := t.TempDir()
	for _, args := range [][]string{
		{"up", "-db", db}, {"status", "-db", db}, {"plan", "-db", db}, {"drift", "-db", db},
		{"lint"}, {"lint", "-db", db}, {"fixture-test"}, {"hash"},
		{"plans", "-out", filepath.Join(out, "PLANS.md")}, {"schema-doc", "-out", filepath.Join(out, "SCHEMA.md")},
		{"freeze", "-db", db, "-out", filepath.Join(out, "version15")},
	} {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			before := snapshot(t, dir)
			beforeDB := snapshot(t, filepath.Dir(db))
			code, stdout, stderr := runCmd(t, append(args, "-dir", dir)...)
			require.Equal(t, exitError, code, "%s\n%s", stdout, stderr)
			if args[0] == "hash" {
				require.Equal(t, "migrate: hash: atlas.sum: not written: "+want+"\n", stderr)
			} else {
				require.Equal(t, "migrate: "+args[0]+": "+want+"\n", stderr)
			}
			require.NotContains(t, stdout+stderr, "added")
			require.Equal(t, before, snapshot(t, dir))
			require.Equal(t, beforeDB, snapshot(t, filepath.Dir(db)))
			es, err := os.ReadDir(out)
			require.NoError(t, err)
			require.Empty(t, es)
		})
	}
}
