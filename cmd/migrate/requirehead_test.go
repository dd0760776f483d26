package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/frozen"
	"github.com/securemsg/storage/internal/migration"
)

// fixture-test -require-head, as CI runs it, fails while no fixture is
// frozen at head (a skipped freeze) and passes once freeze wrote it; the
// repository's own fixtures hold one at head.
func TestFixtureTestRequireHead(t *testing.T) {
	m, err := migration.Default()
	require.NoError(t, err)
	head := m.Head()
	fixtures := t.TempDir()
	copyVersion14(t, filepath.Join(fixtures, "version14"), nil)

	mustRun(t, exitOK, "fixture-test", "-fixtures", fixtures)
	code, stdout, stderr := runCmd(t, "fixture-test", "-fixtures", fixtures, "-require-head")
	require.Equal(t, exitFinding, code, "%s%s", stdout, stderr)
	want := "no fixture is frozen at head " + head + " (" + filepath.Join(fixtures, "version"+head) + "): run bin/migrate freeze and commit it"
	require.Contains(t, stdout, "FAIL "+want)
	require.Contains(t, stderr, "migrate: fixture-test: "+want)
	code, stdout, _ = runCmd(t, "fixture-test", "-fixtures", fixtures, "-require-head", "-format", "gcc")
	require.Equal(t, exitFinding, code)
	require.Contains(t, stdout, filepath.Join(fixtures, "version"+head, "fixture.sql")+":1:1: error: a fixture frozen at head: "+want)

	mustRun(t, exitOK, "freeze", "-fixtures", fixtures)
	mustRun(t, exitOK, "fixture-test", "-fixtures", fixtures, "-require-head")
	// The files freeze writes name the command the guide builds.
	for _, name := range []string{frozen.FixtureFile, frozen.ReadmeFile} {
		b, err := os.ReadFile(filepath.Join(fixtures, "version"+head, name))
		require.NoError(t, err)
		require.Contains(t, string(b), "`bin/migrate freeze`", name)
		require.NotContains(t, string(b), "go -C cmd run", name)
	}

	t.Run("the repository", func(t *testing.T) {
		mustRun(t, exitOK, "fixture-test", "-require-head")
	})
}
