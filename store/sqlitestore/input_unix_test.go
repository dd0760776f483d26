//go:build unix

package sqlitestore_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// Bad input to Open gets an error that says which, with a sentinel, and
// changes nothing: no mode changed, no -lock, -wal or -shm left beside
// the path, the file's bytes as they were. Read-only means no owner write
// permission, so the test holds when run as root too.
func TestOpenBadInputChangesNothing(t *testing.T) {
	ctx := context.Background()
	// database makes a closed database at dir/name with no -lock left.
	database := func(t *testing.T, dir, name string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, mustOpenAt(t, path, storetest.NewKeyring(t)).Close())
		require.NoError(t, os.Remove(path+"-lock"))
		return path
	}
	for _, tc := range []struct {
		name string
		// make returns the path to open; dir is the directory it is in,
		// mode 0755.
		make func(t *testing.T, dir string) string
		keys func(t *testing.T) *seal.Keyring
		want error
		says string
	}{
		{name: "directory", make: func(t *testing.T, dir string) string {
			d := filepath.Join(dir, "d")
			require.NoError(t, os.Mkdir(d, 0o755))
			require.NoError(t, os.Chmod(d, 0o755))
			return d
		}, want: store.ErrNotDatabase, says: "it is a directory"},
		{name: "text file", make: func(t *testing.T, dir string) string {
			f := filepath.Join(dir, "notes.txt")
			require.NoError(t, os.WriteFile(f, []byte("not a database, just some notes\n"), 0o644))
			require.NoError(t, os.Chmod(f, 0o644))
			return f
		}, want: store.ErrNotDatabase, says: "does not start with SQLite's header"},
		{name: "read-only database file", make: func(t *testing.T, dir string) string {
			path := database(t, dir, "ro.db")
			require.NoError(t, os.Chmod(path, 0o400))
			return path
		}, want: fs.ErrPermission, says: "the database file is read-only"},
		{name: "database in a read-only directory", make: func(t *testing.T, dir string) string {
			path := database(t, dir, "client.db")
			require.NoError(t, os.Chmod(dir, 0o555))
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
			return path
		}, want: fs.ErrPermission, says: "its directory is read-only"},
		{name: "new database in a read-only directory", make: func(t *testing.T, dir string) string {
			require.NoError(t, os.Chmod(dir, 0o555))
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
			return filepath.Join(dir, "new.db")
		}, want: fs.ErrPermission, says: "its directory is read-only"},
		{name: "keyring holding no key", make: func(t *testing.T, dir string) string {
			return filepath.Join(dir, "client.db")
		}, keys: func(*testing.T) *seal.Keyring { return &seal.Keyring{} }, want: seal.ErrKey, says: "the keyring holds no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.Chmod(dir, 0o755))
			path := tc.make(t, dir)
			type state struct {
				names []string
				modes map[string]os.FileMode
				bytes map[string]string
			}
			snap := func() state {
				st := state{names: listDir(t, dir), modes: map[string]os.FileMode{".": modeOf(t, dir)}, bytes: map[string]string{}}
				for _, n := range st.names {
					p := filepath.Join(dir, n)
					st.modes[n] = modeOf(t, p)
					if b, err := os.ReadFile(p); err == nil {
						st.bytes[n] = string(b)
					}
				}
				return st
			}
			before := snap()
			keys := storetest.NewKeyring(t)
			if tc.keys != nil {
				keys = tc.keys(t)
			}
			for range 2 {
				s, err := sqlitestore.Open(ctx, path, keys)
				require.ErrorIs(t, err, tc.want)
				require.ErrorContains(t, err, tc.says)
				require.Nil(t, s)
				assert.Equal(t, before, snap(), "nothing changed, nothing left beside the path")
			}
		})
	}
}
