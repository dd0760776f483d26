package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/frozen"
)

func TestFixtureTest(t *testing.T) {
	code, stdout, stderr := runCmd(t, "fixture-test")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Empty(t, stderr)
	require.NotContains(t, stdout, "FAIL")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Greater(t, len(lines), 2, "a header per fixture and one line per check")
	require.Equal(t, "== ../../fixtures/version14 (version 14)", lines[0])
	for _, l := range lines[1:] {
		require.True(t, strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "== "), l)
	}
	// The version-14 proof's checks: up to the next fixture's header.
	v14Checks := slices.IndexFunc(lines[1:], func(l string) bool { return strings.HasPrefix(l, "== ") })
	require.Greater(t, v14Checks, 0)
	require.Contains(t, lines, "== ../../fixtures/legacy (legacy plaintext layout, version 14, upgraded by the store)")

	code, stdout, stderr = runCmd(t, "fixture-test", "-json")
	require.Equal(t, 0, code, stderr)
	var doc fixtureTestDoc
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	require.True(t, doc.OK)
	require.Equal(t, "fixture-test", doc.Command)
	require.NotEmpty(t, doc.Fixtures)
	require.Equal(t, "14", doc.Fixtures[0].Version)
	checks := slices.IndexFunc(lines[1:], func(l string) bool { return strings.HasPrefix(l, "== ") })
	if checks == -1 {
		checks = len(lines) - 1
	}
	require.Len(t, doc.Fixtures[0].Checks, checks, "every check of the version-14 proof")
	last := doc.Fixtures[len(doc.Fixtures)-1]
	require.Equal(t, "../../fixtures/legacy", last.Dir, "the legacy fixture is proved too")
	require.Equal(t, "legacy", last.Version)
	require.True(t, last.OK)
	require.Greater(t, len(last.Checks), 10)

	code, _, stderr = runCmd(t, "fixture-test", "-db", "x")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "flag provided but not defined")

	code, stdout, _ = runCmd(t, "fixture-test", "-fixtures", t.TempDir(), "-json")
	require.Equal(t, exitError, code)
	require.Contains(t, stdout, `"error": "`)
	require.Contains(t, stdout, "no versionNN fixture directory")
}

// TestFixtureTestProvesLegacy: fixture-test proves fixtures/legacy at
// head like every versionNN fixture: the store's legacy upgrade takes it
// to a next version that changes the pending table (a column with a
// DEFAULT and an index), and a change to its data passes only where a
// declaration names it for fixture "legacy".
func TestFixtureTestProvesLegacy(t *testing.T) {
	const touch = "UPDATE storage_key SET created_at = 1;\n"
	// The fixture test key's record, in each fixture named.
	declared := func(fixtures ...string) string {
		var parts []string
		for _, f := range fixtures {
			parts = append(parts, `"`+f+`": {"storage_key": [{"key": {"key_id": 1443627214}, "set": {"created_at": 1}}]}`)
		}
		return `{"fixtures": {` + strings.Join(parts, ", ") + `}}`
	}
	for _, tt := range []struct {
		name, sql, declared string
		code                int
		legacyFails         string // in the legacy proof's failed check, "" if it passes
	}{
		{
			name: "a column with a DEFAULT and an index on the pending table", code: exitOK,
			sql: "ALTER TABLE pending_outbound_message ADD COLUMN scratch_attempts INTEGER NOT NULL DEFAULT 0;\n" +
				"CREATE INDEX pending_outbound_message_scratch_attempts ON pending_outbound_message (scratch_attempts);\n",
		},
		{name: "a change declared for every fixture", sql: touch, declared: declared(append(frozenVersions(t), "legacy")...), code: exitOK},
		{
			name: "a change declared for every versionNN fixture only", sql: touch, declared: declared(frozenVersions(t)...), code: exitFinding,
			legacyFails: "table storage_key, row (key_id=1443627214), column created_at: changed from",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := withFiles(t, map[string]string{"{next}_change.sql": tt.sql})
			if tt.declared != "" {
				fsys[nextVersion(t)+"_change.expect.json"] = &fstest.MapFile{Data: []byte(tt.declared)}
			}
			code, stdout, stderr := runCmd(t, "fixture-test", "-dir", writeDir(t, fsys), "-json")
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			var doc fixtureTestDoc
			require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
			i := slices.IndexFunc(doc.Fixtures, func(f fixtureDoc) bool { return f.Version == "legacy" })
			require.GreaterOrEqual(t, i, 0, "the legacy fixture is proved")
			lf := doc.Fixtures[i]
			require.Equal(t, "../../fixtures/legacy", lf.Dir)
			require.Equal(t, tt.legacyFails == "", lf.OK, "%+v", lf.Checks)
			require.Contains(t, lf.Checks[3].Name, "head "+nextVersion(t), "migrated to the next head")
			if tt.legacyFails != "" {
				var failed []string
				for _, c := range lf.Checks {
					if !c.OK {
						failed = append(failed, c.Error)
						require.Equal(t, "fixture.sql", c.File)
						require.Positive(t, c.Line)
					}
				}
				require.Len(t, failed, 1)
				require.Contains(t, failed[0], tt.legacyFails)
			}
		})
	}
}

// frozenVersions returns the versions of the repository's versionNN
// fixtures.
func frozenVersions(t *testing.T) []string {
	t.Helper()
	dirs, err := frozen.Find(filepath.Join(repo, "fixtures"))
	require.NoError(t, err)
	var out []string
	for _, d := range dirs {
		out = append(out, d.Version)
	}
	return out
}
