package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The exit codes are listed twice for their readers, in the guide's table
// and in -h (exitCodes): both list exactly the codes the command returns
// (exitOK, exitFinding, exitError), each with the same meaning.
func TestExitCodesDocumentedAsReturned(t *testing.T) {
	code := map[int]string{exitOK: "clean", exitFinding: "a finding", exitError: "an error"}

	help := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^  (\d)  ([a-z ]+?)[:,]`).FindAllStringSubmatch(exitCodes, -1) {
		n, _ := strconv.Atoi(m[1])
		help[n] = strings.TrimSpace(m[2])
	}
	require.Equal(t, code, help, "migrate -h's exit codes")

	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	guide := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| \*\*(\d)\*\* \| ([^|]+?) \|`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[1])
		guide[n] = strings.TrimSpace(m[2])
	}
	require.Equal(t, code, guide, "the guide's table of exit codes")
}
