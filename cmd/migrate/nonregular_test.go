//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A -db that is not a regular file (a FIFO, a device, a directory, or a
// link to one) is refused at once with exit 2, before SQLite opens it (a
// FIFO would block it for ever), and nothing is created beside it.
func TestDBNotRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.db")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	subdir := filepath.Join(dir, "dir.db")
	require.NoError(t, os.Mkdir(subdir, 0o700))
	link := filepath.Join(dir, "link.db")
	require.NoError(t, os.Symlink(fifo, link))
	for _, tt := range []struct {
		name, path, says string
	}{
		{"fifo", fifo, "is a FIFO, not a regular file"},
		{"link to a fifo", link, "is a FIFO, not a regular file"},
		{"directory", subdir, "is a directory, not a database file"},
		{"device", os.DevNull, "is a character device, not a regular file"},
	} {
		for _, args := range [][]string{
			{"status"}, {"drift"}, {"plan"}, {"up"}, {"lint"}, {"freeze"},
			{"drift", "-format", "github"}, {"status", "-json"},
		} {
			t.Run(tt.name+"/"+args[0], func(t *testing.T) {
				type result struct {
					code           int
					stdout, stderr string
				}
				done := make(chan result, 1)
				go func() {
					code, stdout, stderr := runCmd(t, append(args, "-db", tt.path)...)
					done <- result{code, stdout, stderr}
				}()
				select {
				case r := <-done:
					require.Equal(t, exitError, r.code, r.stderr)
					require.Contains(t, r.stdout+r.stderr, tt.path+" "+tt.says)
				case <-time.After(30 * time.Second):
					t.Fatalf("migrate %v -db %s still runs after 30s", args, tt.path)
				}
			})
		}
	}
	names := []string{}
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range es {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"dir.db", "fifo.db", "link.db"}, names, "nothing created beside them")
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeNamedPipe, "the FIFO is left as it was")
	sub, err := os.ReadDir(subdir)
	require.NoError(t, err)
	require.Empty(t, sub)
}
