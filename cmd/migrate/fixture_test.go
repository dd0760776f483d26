package main

import (
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
	require.Greater(t, len(lines), 1, "one line per check")
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, "ok "), l)
	}

	code, _, stderr = runCmd(t, "fixture-test", "-db", "x")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "flag provided but not defined")
}
