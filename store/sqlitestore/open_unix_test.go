//go:build unix

package sqlitestore_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store/sqlitestore"
)

// Database files are created owner-only under the usual umask 022: the
// store creates the file 0600 before SQLite opens it, and SQLite gives the
// WAL and shared-memory files the database file's mode. An existing file
// open to group or others is restricted.
func TestOpenFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	ctx := context.Background()

	modes := func(t *testing.T, path string) map[string]os.FileMode {
		t.Helper()
		out := map[string]os.FileMode{}
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(f)
			require.NoError(t, err, "%s exists while the store is open and has written", filepath.Base(f))
			out[filepath.Base(f)] = fi.Mode().Perm()
		}
		return out
	}
	want := func(path string) map[string]os.FileMode {
		b := filepath.Base(path)
		return map[string]os.FileMode{b: 0o600, b + "-wal": 0o600, b + "-shm": 0o600}
	}

	t.Run("sqlite alone creates 0644", func(t *testing.T) {
		// What the store guards against: without it, the same DSN makes
		// world-readable files.
		path := dbPath(t)
		rawExec(t, path, "CREATE TABLE t (x)")
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	})
	t.Run("new database", func(t *testing.T) {
		path := dbPath(t)
		s := mustOpenAt(t, path, storetest.NewKeyring(t))
		insert(t, s, alice, 1)
		require.Equal(t, want(path), modes(t, path))
		require.NoError(t, s.Close())
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	})
	t.Run("existing 0644 database", func(t *testing.T) {
		path := dbPath(t)
		kr := storetest.NewKeyring(t)
		mustOpenAt(t, path, kr).Close()
		require.NoError(t, os.Chmod(path, 0o644))
		s, err := sqlitestore.Open(ctx, path, kr)
		require.NoError(t, err)
		defer s.Close()
		insert(t, s, alice, 1)
		require.Equal(t, want(path), modes(t, path))
	})
	t.Run("existing 0640 database keeps no group access", func(t *testing.T) {
		path := dbPath(t)
		kr := storetest.NewKeyring(t)
		mustOpenAt(t, path, kr).Close()
		require.NoError(t, os.Chmod(path, 0o640))
		s := mustOpenAt(t, path, kr)
		insert(t, s, bob, 2)
		require.Equal(t, want(path), modes(t, path))
	})
}
