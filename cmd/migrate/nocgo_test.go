package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBuildWithoutCgoSaysWhy builds the command with cgo off, as Go does on
// a machine without gcc: the build must stop with the reason, not with an
// undefined name deep in the SQLite driver.
func TestBuildWithoutCgoSaysWhy(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	cmd := exec.Command(goTool, "build", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "built without cgo:\n%s", out)
	require.Contains(t, string(out), "this project needs cgo and a C compiler (gcc)")
	require.NotContains(t, string(out), "undefined: sqlite3")
}
