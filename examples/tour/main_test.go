package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out strings.Builder
	require.NoError(t, run(&out))
	got := out.String()
	for _, want := range []string{
		`alice sends "running late": NOT SENT (hand-off failed), kept pending`,
		"alice has 4 pending; pages of 2:",
		"retry handed off 1 message(s)",
		`abandon "draft, please ignore": ABANDONED (network calls: 0)`,
		"abandon it again: NOT_PENDING",
		"retry handed off 0 message(s): the abandoned one is never sent",
		`alice receives the ACK for "meeting moved to 3pm": cleared=false`,
		`alice receives the ACK for "hi bob": cleared=true`,
		"(bundle fetches: 0, the session survived the restart)",
		`bob receives "sent before the restart" and finalizes it: FINALIZED, ACK sent: true`,
		"alice lists the recipients with pending messages and retries each:",
		"bob/1 (oldest pending: sequence 8): retry handed off 2 message(s)",
		`bob receives "not handed off before the restart" and finalizes it: FINALIZED, ACK sent: true`,
		`alice receives the ACK for "not handed off before the restart": cleared=true`,
		`alice receives "see you at 3" and finalizes it: FINALIZED, ACK sent: true`,
		"alice has 0 pending; pages of 2:",
		`bob receives "did you get this?" (pending inbound, sequence`,
		"bob holds 1 received message(s) not finalized; hands each to the application again:",
		`bob receives "did you get this?" and finalizes it: FINALIZED, ACK sent: true`,
		`alice receives the ACK for "did you get this?": cleared=true`,
	} {
		require.Contains(t, got, want)
	}
	// The databases are removed at exit.
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left)
}
