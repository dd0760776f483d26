//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// up refuses a -journal, -wal or -shm beside a database below head, or
// beside one it would create, that is a symbolic or a hard link, exit 2,
// before SQLite writes: the file it also names keeps its bytes and its
// mode, and nothing is applied or created.
func TestUpRefusesLinkedSideFiles(t *testing.T) {
	for _, newDB := range []bool{false, true} {
		for _, suffix := range []string{"-journal", "-wal", "-shm"} {
			for _, kind := range []string{"symbolic", "hard"} {
				t.Run(map[bool]string{false: "version 14", true: "new"}[newDB]+suffix+"/"+kind, func(t *testing.T) {
					db := v14DB(t)
					if newDB {
						db = filepath.Join(t.TempDir(), "new.db")
					}
					victim := filepath.Join(t.TempDir(), "victim")
					require.NoError(t, os.WriteFile(victim, []byte("someone else's file"), 0o644))
					require.NoError(t, os.Chmod(victim, 0o644))
					if kind == "symbolic" {
						require.NoError(t, os.Symlink(victim, db+suffix))
					} else {
						// A hard link needs the same file system: the
						// victim lives beside the database.
						victim = db + ".victim"
						require.NoError(t, os.WriteFile(victim, []byte("someone else's file"), 0o644))
						require.NoError(t, os.Chmod(victim, 0o644))
						require.NoError(t, os.Link(victim, db+suffix))
					}
					before, _ := os.ReadFile(db)
					code, _, stderr := runCmd(t, "up", "-db", db)
					require.Equal(t, exitError, code, stderr)
					require.Contains(t, stderr, suffix)
					require.Contains(t, stderr, kind)
					got, err := os.ReadFile(victim)
					require.NoError(t, err)
					require.Equal(t, "someone else's file", string(got))
					fi, err := os.Stat(victim)
					require.NoError(t, err)
					require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
					after, _ := os.ReadFile(db)
					require.Equal(t, before, after, "nothing applied")
					if newDB {
						require.NoFileExists(t, db, "nothing created")
					}
				})
			}
		}
	}
}
