package sqlitestore_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// While a store is open, a second Open of its file fails at once with
// store.ErrInUse naming the file, by any path to it, and changes nothing:
// the first store goes on working. Closing it, or a failed Open, leaves
// the file free.
func TestOpenHoldsFile(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		other func(t *testing.T, path string) string // another path to the file
	}{
		{"same path", func(_ *testing.T, path string) string { return path }},
		{"relative path", func(t *testing.T, path string) string {
			wd, err := os.Getwd()
			require.NoError(t, err)
			rel, err := filepath.Rel(wd, path)
			require.NoError(t, err)
			return rel
		}},
		{"symlink", func(t *testing.T, path string) string {
			link := filepath.Join(t.TempDir(), "link.db")
			require.NoError(t, os.Symlink(path, link))
			return link
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := dbPath(t)
			kr := storetest.NewKeyring(t)
			first := mustOpenAt(t, path, kr)
			m := insert(t, first, alice, 1)
			other := tt.other(t, path)

			start := time.Now()
			s, err := sqlitestore.Open(ctx, other, kr)
			waited := time.Since(start)
			require.ErrorIs(t, err, store.ErrInUse)
			require.Nil(t, s)
			require.ErrorContains(t, err, other)
			require.Less(t, waited, time.Second, "refused at once, not after a busy wait")

			require.Equal(t, []storeMsg{{m.Sequence, m.ID}}, msgs(all(t, first)), "the first store is untouched")
			insert(t, first, alice, 2)
			require.NoError(t, first.Close())
			second := mustOpenAt(t, other, kr)
			require.Len(t, all(t, second), 2)
		})
	}
	t.Run("failed open releases", func(t *testing.T) {
		path := dbPath(t)
		kr := storetest.NewKeyring(t)
		require.NoError(t, mustOpenAt(t, path, kr).Close())
		_, err := sqlitestore.Open(ctx, path, storetest.NewKeyring(t))
		require.ErrorIs(t, err, seal.ErrWrongKey)
		mustOpenAt(t, path, kr)
	})
	for _, name := range []string{"", ":memory:"} {
		t.Run(fmt.Sprintf("in memory %q", name), func(t *testing.T) {
			// Refused as an argument (no file to run in WAL mode and
			// hold), and no file made for it.
			t.Chdir(t.TempDir())
			_, err := sqlitestore.Open(ctx, name, storetest.NewKeyring(t))
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.ErrorContains(t, err, "the store needs a database file")
			entries, err := os.ReadDir(".")
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}
}

type storeMsg struct {
	seq int64
	id  any
}

func msgs(ms []store.PendingMessage) []storeMsg {
	var out []storeMsg
	for _, m := range ms {
		out = append(out, storeMsg{m.Sequence, m.ID})
	}
	return out
}

// holdEnv makes this test binary, run as a child by
// TestOpenHoldEndsWithKilledProcess, open the store named by the variable
// ("path key-hex"), write a message, print "held" and wait to be killed.
const holdEnv = "SQLITESTORE_TEST_HOLD"

func TestMain(m *testing.M) {
	if v := os.Getenv(holdEnv); v != "" {
		holdUntilKilled(v)
		return
	}
	os.Exit(m.Run())
}

func holdUntilKilled(v string) {
	var path, keyHex string
	if _, err := fmt.Sscan(v, &path, &keyHex); err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		os.Exit(2)
	}
	secret, err := hex.DecodeString(keyHex)
	if err == nil {
		var k seal.Key
		if k, err = seal.NewKey(secret); err == nil {
			var kr *seal.Keyring
			if kr, err = seal.NewKeyring(k); err == nil {
				var s *sqlitestore.Store
				if s, err = sqlitestore.Open(context.Background(), path, kr); err == nil {
					_, err = s.InsertPending(context.Background(), alice, storetest.ID(1), []byte("from the child"))
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		os.Exit(2)
	}
	fmt.Println("held")
	select {} // until killed
}

// secretKeyring returns a key's secret (bytes first, first+1, ...) and a
// keyring of that key, for a child process to be given the same key.
func secretKeyring(t *testing.T, first byte) ([]byte, *seal.Keyring) {
	t.Helper()
	secret := make([]byte, seal.KeySize)
	for i := range secret {
		secret[i] = byte(i) + first
	}
	k, err := seal.NewKey(secret)
	require.NoError(t, err)
	kr, err := seal.NewKeyring(k)
	require.NoError(t, err)
	return secret, kr
}

// holdInChild runs this test binary as a child that opens the store at
// path with the key secret, writes a message and holds the file until
// killed (killed at the latest when the test ends).
func holdInChild(t *testing.T, path string, secret []byte) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path+" "+hex.EncodeToString(secret))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)
	return cmd
}

// A store's hold on its file ends with its process: a child process holds
// the file (another process's Open is refused), is killed with SIGKILL in
// the middle of its life, and the file opens at once afterwards, with what
// the child committed. No stale lock is left to clear.
func TestOpenHoldEndsWithKilledProcess(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	secret, kr := secretKeyring(t, 1)
	cmd := holdInChild(t, path, secret)

	start := time.Now()
	_, err := sqlitestore.Open(ctx, path, kr)
	require.ErrorIs(t, err, store.ErrInUse)
	require.ErrorContains(t, err, path)
	require.Less(t, time.Since(start), time.Second)

	require.NoError(t, cmd.Process.Kill()) // SIGKILL on unix
	_ = cmd.Wait()
	s := mustOpenAt(t, path, kr)
	got := all(t, s)
	require.Len(t, got, 1)
	require.Equal(t, []byte("from the child"), got[0].Plaintext)
}

// Open uses the driver its context names (internal/sqliteaccess.WithDriver, how the
// reliability tests inject faults); a failure to open through it releases
// the file.
func TestOpenThroughContextDriver(t *testing.T) {
	path := dbPath(t)
	kr := storetest.NewKeyring(t)
	_, err := sqlitestore.Open(sqliteaccess.WithDriver(context.Background(), "no-such-driver"), path, kr)
	require.ErrorContains(t, err, `unknown driver "no-such-driver"`)
	mustOpenAt(t, path, kr)
}
