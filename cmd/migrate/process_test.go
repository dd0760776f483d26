package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// asMainEnv, set in the environment of the test binary, makes it run as
// the migrate command (TestMain calls main) on its own arguments.
const asMainEnv = "MIGRATE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		main()
	}
	os.Exit(m.Run())
}

// goRunMigrate matches a command line that runs migrate through go run,
// which reports every non-zero exit of the program as 1.
var goRunMigrate = regexp.MustCompile(`\bgo (-C \S+ )?run \S*migrate\b`)

// TestDocumentedCommandsKeepExitCodes reads every command line the
// README, the pipeline guide and .ci/run give: none runs migrate through
// go run, which folds an error (2) into a finding (1); they run a built
// binary or go tool, which pass the status through. The command run as a
// process of its own exits 0, 1 and 2 as it documents.
func TestDocumentedCommandsKeepExitCodes(t *testing.T) {
	docs := []string{"README.md", filepath.Join("cmd", "migrate", "README.md"), filepath.Join(".ci", "run")}
	read := 0
	for _, doc := range docs {
		f, err := os.Open(filepath.Join(repo, doc))
		if errors.Is(err, os.ErrNotExist) && doc != "README.md" {
			continue
		}
		require.NoError(t, err)
		read++
		lines := bufio.NewScanner(f)
		for n := 1; lines.Scan(); n++ {
			require.False(t, goRunMigrate.MatchString(lines.Text()), "%s:%d runs migrate with go run, which turns exit 2 into 1: %s", doc, n, lines.Text())
		}
		require.NoError(t, lines.Err())
		f.Close()
	}
	require.GreaterOrEqual(t, read, 2, "the README and .ci/run at least")

	for _, tt := range []struct {
		name string
		args func(t *testing.T) []string
		want int
	}{
		{name: "clean", args: withDB("status", headWith()), want: exitOK},
		{name: "a finding", args: withDB("status", v14With()), want: exitFinding},
		{name: "an error", args: withDB("status", func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing.db") }), want: exitError},
		{name: "a usage error", args: func(*testing.T) []string { return []string{"status"} }, want: exitError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args(t)...)
			cmd.Env = append(os.Environ(), asMainEnv+"=1")
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.want, code, "%s", out)
		})
	}
}
