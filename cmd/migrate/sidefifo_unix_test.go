//go:build unix

package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A FIFO planted as the database's -journal, -wal or -shm makes every
// command that reads the database exit 2 at once instead of blocking in
// SQLite's open of a hot journal.
func TestSideFileFIFORefused(t *testing.T) {
	for _, suffix := range []string{"-journal", "-wal", "-shm"} {
		db := headDB(t)
		require.NoError(t, syscall.Mkfifo(db+suffix, 0o600))
		for _, cmd := range [][]string{{"status", "-db", db}, {"drift", "-db", db}, {"plan", "-db", db}, {"up", "-db", db}} {
			t.Run(suffix+"/"+cmd[0], func(t *testing.T) {
				type result struct {
					code   int
					stderr string
				}
				done := make(chan result, 1)
				go func() { code, _, stderr := runCmd(t, cmd...); done <- result{code, stderr} }()
				select {
				case r := <-done:
					require.Equal(t, exitError, r.code, r.stderr)
					require.Contains(t, r.stderr, "is a FIFO")
				case <-time.After(30 * time.Second):
					t.Fatal("the command blocked on the FIFO")
				}
			})
		}
	}
}
