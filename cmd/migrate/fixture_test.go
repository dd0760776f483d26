package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

	code, _, stderr = runCmd(t, "fixture-test", "-db", "x")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "flag provided but not defined")

	code, stdout, _ = runCmd(t, "fixture-test", "-fixtures", t.TempDir(), "-json")
	require.Equal(t, exitError, code)
	require.Contains(t, stdout, `"error": "`)
	require.Contains(t, stdout, "no versionNN fixture directory")
}
