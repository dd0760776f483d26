package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCrashSafe runs the program: every message alice recorded reaches
// bob's application exactly once, whatever instant each was killed at,
// and nothing stays pending.
func TestCrashSafe(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), &out, t.TempDir()))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Equal(t, "bob's application has:", lines[0])
	require.Equal(t, "alice has 0 pending", lines[len(lines)-1])
	require.ElementsMatch(t, []string{
		`  "one"`,
		`  "two: killed before it was sent"`,
		`  "three: killed between commit and hand-off"`,
		`  "four: killed after the hand-off, before it was recorded sent"`,
		`  "five"`,
		`  "six"`,
	}, lines[1:len(lines)-1], "each message once")
}
