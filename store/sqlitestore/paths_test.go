package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

func keyring(t *testing.T) *seal.Keyring {
	t.Helper()
	k, err := seal.GenerateKey()
	require.NoError(t, err)
	kr, err := seal.NewKeyring(k)
	require.NoError(t, err)
	return kr
}

// entries lists what dir holds.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A SQLite URI is not a path: in any case and form it is refused with
// ErrInvalidArgument, and nothing is created (go-sqlite3 would otherwise
// take "file::memory:?cache=shared" as a file of that name); so are ""
// and ":memory:", and a path with a NUL byte (the system's EINVAL
// otherwise).
func TestOpenRefusesSQLiteURIs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, path := range []string{
		"file::memory:?cache=shared",
		"file:alice.db",
		"FILE:alice.db?mode=rwc",
		"File:" + filepath.Join(dir, "alice.db"),
		"file:///" + filepath.Join(dir, "alice.db"),
		"",
		":memory:",
		"alice\x00.db",
	} {
		t.Run(path, func(t *testing.T) {
			_, err := sqlitestore.Open(t.Context(), path, keyring(t))
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Empty(t, entries(t, dir), "a refused path creates nothing")
		})
	}
}

// A nil Option is refused with ErrInvalidArgument naming its place, not
// a panic, and nothing is created.
func TestOpenRefusesNilOption(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sqlitestore.Option
		want string
	}{
		{"alone", []sqlitestore.Option{nil}, "option 1 of 1 is nil"},
		{"after a valid one", []sqlitestore.Option{sqlitestore.WithSequenceRestart(), nil}, "option 2 of 2 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := sqlitestore.Open(t.Context(), filepath.Join(dir, "alice.db"), keyring(t), tc.opts...)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, entries(t, dir), "a refused option creates nothing")
		})
	}
}

// A failed Open leaves no file it created: a context done before Open,
// and a failure after the database file was made (here the driver cannot
// be opened).
func TestFailedOpenLeavesNoFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		{"cancelled", func(t *testing.T) context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}},
		{"failing after the file was made", func(t *testing.T) context.Context {
			return sqliteaccess.WithDriver(t.Context(), "no-such-driver")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := sqlitestore.Open(tc.ctx(t), filepath.Join(dir, "alice.db"), keyring(t))
			require.Error(t, err)
			require.Empty(t, entries(t, dir), "a failed Open leaves nothing behind")
		})
	}
}

// Every Open error names the path once; the wrong-key error names the
// database's key id and the keyring's once each.
func TestOpenErrorsNameThePathOnce(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "alice.db")
	kr := keyring(t)
	s, err := sqlitestore.Open(t.Context(), good, kr)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	notDB := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notDB, []byte("not a database"), 0o600))
	other := keyring(t)

	for _, tc := range []struct {
		name, path string
		keys       *seal.Keyring
		is         error
	}{
		{"not a database", notDB, kr, store.ErrNotDatabase},
		{"wrong key", good, other, seal.ErrWrongKey},
		{"nil keyring", good, nil, store.ErrInvalidArgument},
		{"a directory", dir, kr, store.ErrNotDatabase},
		{"a name too long", filepath.Join(dir, strings.Repeat("n", 300)+".db"), kr, syscall.ENAMETOOLONG},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlitestore.Open(t.Context(), tc.path, tc.keys)
			require.ErrorIs(t, err, tc.is)
			msg := err.Error()
			require.Equal(t, 1, strings.Count(msg, tc.path), "the path once: %q", msg)
			require.Equal(t, 1, strings.Count(msg, "store: "), "the context once: %q", msg)
			if tc.is == seal.ErrWrongKey {
				for _, id := range append(kr.KeyIDs(), other.KeyIDs()...) {
					require.Equal(t, 1, strings.Count(msg, strconv.FormatUint(uint64(id), 10)), "key id %d once: %q", id, msg)
				}
			}
		})
	}
}

// A refused file in another journal mode than WAL is left byte for byte as
// it was: Open switches to WAL only once the file passed its checks.
func TestRefusedRollbackJournalFileIsUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alice.db")
	kr := keyring(t)
	s, err := sqlitestore.Open(t.Context(), path, kr)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	raw, err := sql.Open(sqlitedriver.Name, path)
	require.NoError(t, err)
	var mode string
	require.NoError(t, raw.QueryRow("PRAGMA journal_mode = DELETE").Scan(&mode))
	require.Equal(t, "delete", mode)
	_, err = raw.Exec("CREATE VIEW planted AS SELECT 1")
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	_, err = sqlitestore.Open(t.Context(), path, kr)
	require.ErrorIs(t, err, schema.ErrUnknownObject)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the refused file is unchanged")
}
