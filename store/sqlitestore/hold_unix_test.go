//go:build unix

package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// listDir returns the names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// modeOf returns the permission bits of the file at name, not following
// a symbolic link.
func modeOf(t *testing.T, name string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(name)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

// One writer per file whatever the path: a dangling symbolic link is
// refused (nothing created through it), a lock file removed or replaced
// under a live store (in this process or another) lets no second store
// in, and planted symbolic links beside the database are never followed.
func TestOpenOneWriterEveryPath(t *testing.T) {
	ctx := context.Background()

	t.Run("dangling symbolic link", func(t *testing.T) {
		dir := t.TempDir()
		link := filepath.Join(dir, "link.db")
		require.NoError(t, os.Symlink(filepath.Join(dir, "real.db"), link))
		_, err := sqlitestore.Open(ctx, link, storetest.NewKeyring(t))
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.ErrorContains(t, err, fmt.Sprintf("symbolic link to a file that does not exist, %q", filepath.Join(dir, "real.db")))
		require.Equal(t, 1, strings.Count(err.Error(), link), "the path once: %v", err)
		assert.Equal(t, []string{"link.db"}, listDir(t, dir), "nothing created")
	})

	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, lock string)
	}{
		{"lock file removed", func(t *testing.T, lock string) { require.NoError(t, os.Remove(lock)) }},
		{"lock file replaced", func(t *testing.T, lock string) {
			require.NoError(t, os.WriteFile(lock+".new", nil, 0o600))
			require.NoError(t, os.Rename(lock+".new", lock))
		}},
	} {
		t.Run(tc.name+" in this process", func(t *testing.T) {
			path := dbPath(t)
			kr := storetest.NewKeyring(t)
			first := mustOpenAt(t, path, kr)
			m := insert(t, first, alice, 1)
			tc.tamper(t, path+"-lock")
			for _, p := range []string{path, filepath.Join(filepath.Dir(path), ".", filepath.Base(path))} {
				_, err := sqlitestore.Open(ctx, p, kr)
				require.ErrorIs(t, err, store.ErrInUse)
				require.ErrorContains(t, err, path)
			}
			assert.Equal(t, []store.PendingMessage{m}, all(t, first), "the first store works on")
		})
		t.Run(tc.name+" in another process", func(t *testing.T) {
			path := dbPath(t)
			secret, kr := secretKeyring(t, 7)
			holdInChild(t, path, secret)
			tc.tamper(t, path+"-lock")
			_, err := sqlitestore.Open(ctx, path, kr)
			require.ErrorIs(t, err, store.ErrInUse)
			require.ErrorContains(t, err, path)
		})
	}

	t.Run("lock file is a symbolic link", func(t *testing.T) {
		path := dbPath(t)
		kr := storetest.NewKeyring(t)
		require.NoError(t, mustOpenAt(t, path, kr).Close())
		require.NoError(t, os.Remove(path+"-lock"))
		elsewhere := filepath.Join(t.TempDir(), "elsewhere")
		require.NoError(t, os.Symlink(elsewhere, path+"-lock"))
		before := dump(t, path)
		_, err := sqlitestore.Open(ctx, path, kr)
		require.ErrorIs(t, err, store.ErrSymlink)
		_, err = os.Lstat(elsewhere)
		require.ErrorIs(t, err, fs.ErrNotExist, "nothing created where the link points")
		assert.Equal(t, before, dump(t, path))
	})

	for _, side := range []string{"-wal", "-shm", "-journal"} {
		for _, link := range []struct {
			kind string
			make func(other, name string) error
		}{{"symbolic", os.Symlink}, {"hard", os.Link}} {
			t.Run(side+" is a "+link.kind+" link", func(t *testing.T) {
				path := dbPath(t)
				kr := storetest.NewKeyring(t)
				require.NoError(t, mustOpenAt(t, path, kr).Close())
				// Beside the database: a hard link needs one file system.
				other := filepath.Join(filepath.Dir(path), "precious")
				require.NoError(t, os.WriteFile(other, []byte("someone else's file"), 0o644))
				require.NoError(t, os.Chmod(other, 0o644))
				require.NoError(t, link.make(other, path+side))
				_, err := sqlitestore.Open(ctx, path, kr)
				require.ErrorIs(t, err, store.ErrSymlink)
				require.ErrorContains(t, err, path+side)
				assert.Equal(t, os.FileMode(0o644), modeOf(t, other), "the other file's mode is not changed")
				got, err := os.ReadFile(other)
				require.NoError(t, err)
				assert.Equal(t, "someone else's file", string(got))
			})
		}
	}
}

// The database and its -wal and -shm are 0600 whatever the path's
// spelling: opened through a symbolic link (to a new file, or to one a
// crash left 0644 with its -wal and -shm), the real files are restricted,
// not the link's names.
func TestOpenFileModesThroughSymlink(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	ctx := context.Background()
	for _, crashed := range []bool{false, true} {
		t.Run(map[bool]string{false: "new file", true: "left 0644 by a crash"}[crashed], func(t *testing.T) {
			dir := t.TempDir()
			real := filepath.Join(dir, "real.db")
			link := filepath.Join(t.TempDir(), "link.db")
			kr := storetest.NewKeyring(t)
			if crashed {
				require.NoError(t, mustOpenAt(t, real, kr).Close())
				require.NoError(t, os.Chmod(real, 0o644))
				for _, side := range []string{"-wal", "-shm"} {
					require.NoError(t, os.WriteFile(real+side, nil, 0o644))
					require.NoError(t, os.Chmod(real+side, 0o644))
				}
			} else {
				// A link to a file not created yet is refused (see
				// TestOpenOneWriterEveryPath); a link to the directory is
				// a spelling of the same file.
				require.NoError(t, os.Remove(filepath.Dir(link)))
				require.NoError(t, os.Symlink(dir, filepath.Dir(link)))
				link = filepath.Join(filepath.Dir(link), "real.db")
			}
			if crashed {
				require.NoError(t, os.Symlink(real, link))
			}
			s, err := sqlitestore.Open(ctx, link, kr)
			require.NoError(t, err)
			defer s.Close()
			insert(t, s, alice, 1)
			for _, f := range []string{real, real + "-wal", real + "-shm"} {
				assert.Equal(t, os.FileMode(0o600), modeOf(t, f), filepath.Base(f))
			}
		})
	}
}

// A refused Open gives back every mode it restricted: the database file
// and its -wal and -shm, left 0644, are 0644 again, and their bytes are
// as they were, whichever check refuses the file.
func TestRefusedOpenLeavesModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string) *seal.Keyring
		is   error
	}{
		{"wrong key", func(t *testing.T, path string) *seal.Keyring {
			require.NoError(t, mustOpenAt(t, path, storetest.NewKeyring(t)).Close())
			return storetest.NewKeyring(t)
		}, seal.ErrWrongKey},
		{"another application's database", func(t *testing.T, path string) *seal.Keyring {
			raw, err := sql.Open(sqlitedriver.Name, path)
			require.NoError(t, err)
			_, err = raw.Exec("CREATE TABLE notes (body TEXT)")
			require.NoError(t, err)
			require.NoError(t, raw.Close())
			return storetest.NewKeyring(t)
		}, schema.ErrUnknownState},
		{"SQLite's header, then no database", func(t *testing.T, path string) *seal.Keyring {
			require.NoError(t, os.WriteFile(path, append([]byte("SQLite format 3\x00"), make([]byte, 100)...), 0o600))
			return storetest.NewKeyring(t)
		}, store.ErrNotDatabase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			kr := tc.make(t, path)
			files := []string{path}
			for _, side := range []string{"-wal", "-shm"} {
				if _, err := os.Stat(path + side); err == nil {
					files = append(files, path+side)
				}
			}
			before := map[string][]byte{}
			for _, f := range files {
				require.NoError(t, os.Chmod(f, 0o644))
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				before[f] = b
			}
			_, err := sqlitestore.Open(ctx, path, kr)
			require.ErrorIs(t, err, tc.is)
			for _, f := range files {
				assert.Equal(t, os.FileMode(0o644), modeOf(t, f), filepath.Base(f))
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				assert.Equal(t, before[f], b, filepath.Base(f))
			}
		})
	}
}
