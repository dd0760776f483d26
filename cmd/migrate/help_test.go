package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// help -json, -h -json and a command's -h -json write one JSON document
// (the commands, their flags and the exit codes) and nothing on stderr;
// without -json they print the usage text.
func TestHelpJSON(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		commands []string
	}{
		{[]string{"help", "-json"}, nil},
		{[]string{"-h", "-json"}, nil},
		{[]string{"--help", "-json"}, nil},
		{[]string{"lint", "-h", "-json"}, []string{"lint"}},
		{[]string{"drift", "-json", "-h"}, []string{"drift"}},
	} {
		t.Run(tt.args[0]+" "+tt.args[1], func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.args...)
			require.Equal(t, exitOK, code)
			require.Empty(t, stderr)
			var doc helpDoc
			require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
			require.Equal(t, "help", doc.Command)
			require.True(t, doc.OK)
			var names []string
			for _, c := range doc.Commands {
				names = append(names, c.Name)
				require.NotEmpty(t, c.Summary)
			}
			want := tt.commands
			if want == nil {
				for _, c := range commands {
					want = append(want, c.name)
				}
			}
			require.Equal(t, want, names)
			require.Equal(t, []int{exitOK, exitFinding, exitError}, []int{doc.ExitCodes[0].Code, doc.ExitCodes[1].Code, doc.ExitCodes[2].Code})
			require.Len(t, doc.ExitCodes, 3)
			require.Contains(t, doc.ExitCodes[1].Meaning, "a failed fixture check", "continuation lines are joined")
			if tt.commands != nil {
				var flags []string
				for _, f := range doc.Commands[0].Flags {
					flags = append(flags, f.Name)
				}
				require.Contains(t, flags, "format")
				require.Contains(t, flags, "json")
			}
		})
	}
	code, stdout, _ := runCmd(t, "help")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "usage: migrate <command> [flags]")
	code, _, stderr := runCmd(t, "lint", "-h")
	require.Equal(t, exitOK, code)
	require.Contains(t, stderr, "usage: migrate lint")
}
