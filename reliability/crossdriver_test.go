package reliability_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// buildPeer builds reliability/internal/driverpeer with the other
// CGO_ENABLED than this test binary's, so that it links the other SQLite
// driver, and checks that it does. It skips the test when the other build
// needs cgo and no C compiler is installed.
func buildPeer(t *testing.T) string {
	t.Helper()
	cgo := "0"
	if sqlitedriver.Package != "github.com/mattn/go-sqlite3" {
		cgo = "1"
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if cgo == "1" {
		out, err := exec.Command(goBin, "env", "CC").Output()
		cc := strings.Fields(strings.TrimSpace(string(out)))
		if err != nil || len(cc) == 0 {
			t.Skip("the other SQLite driver, mattn/go-sqlite3, needs cgo and `go env CC` names no C compiler")
		}
		if _, err := exec.LookPath(cc[0]); err != nil {
			t.Skipf("the other SQLite driver, mattn/go-sqlite3, needs cgo and a C compiler: %s is not installed", cc[0])
		}
	}
	bin := filepath.Join(t.TempDir(), "driverpeer")
	cmd := exec.Command(goBin, "build", "-o", bin, "./internal/driverpeer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "CGO_ENABLED=%s go build driverpeer:\n%s", cgo, out)
	got := runPeer(t, bin, "driver")
	require.Len(t, got, 1)
	require.NotEqual(t, sqlitedriver.Package, got[0], "the peer links the other driver")
	t.Logf("this test: %s; the peer (CGO_ENABLED=%s): %s", sqlitedriver.Package, cgo, got[0])
	return bin
}

// runPeer runs the peer and returns the lines it printed; it must exit 0.
func runPeer(t *testing.T, bin string, args ...string) []string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "driverpeer %s: %s", strings.Join(args, " "), stderr.String())
	if len(out) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// peerKey is a storage key for the cross-driver tests, derived from name.
func peerKey(t *testing.T, name string) (seal.Key, string) {
	t.Helper()
	sum := sha256.Sum256([]byte("cross-driver key " + name))
	k, err := seal.NewKey(sum[:])
	require.NoError(t, err)
	return k, hex.EncodeToString(sum[:])
}

// dumpStore opens the store at path with keys and returns what the peer's
// dump prints of it: every pending message, then the count.
func dumpStore(t *testing.T, path string, keys ...seal.Key) []string {
	t.Helper()
	ctx := context.Background()
	kr, err := seal.NewKeyring(keys[0], keys[1:]...)
	require.NoError(t, err)
	s, err := sqlitestore.Open(ctx, path, kr)
	require.NoError(t, err)
	defer s.Close()
	var lines []string
	var after *int64
	for {
		page, err := s.PendingMessages(ctx, store.PageRequest{After: after, Limit: store.MaxPageSize})
		require.NoError(t, err)
		for _, m := range page.Messages {
			lines = append(lines, fmt.Sprintf("%d %s %d %s %x", m.Sequence, m.Recipient.UserID, m.Recipient.DeviceID, m.ID, m.Plaintext))
		}
		if page.NextAfterSequence == nil {
			break
		}
		after = page.NextAfterSequence
	}
	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return append(lines, fmt.Sprintf("count %d", n))
}

// A file passes between the two SQLite drivers, one process each, and
// every step of one is seen whole by the other: the peer seals a legacy
// plaintext queue this test's driver wrote, this driver reads the sealed
// rows and stores more, the peer reads them and stores more, the peer
// rotates the storage key and this driver opens the file with the new key
// alone (and not with the old), this driver rotates again and the peer
// reads the file with that key. The file passes integrity_check at the
// end.
func TestCrossDriverFile(t *testing.T) {
	ctx := context.Background()
	bin := buildPeer(t)
	path := filepath.Join(t.TempDir(), "client.db")

	// The legacy plaintext layout, written by this driver.
	text, err := os.ReadFile("../fixtures/legacy/fixture.sql")
	require.NoError(t, err)
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	require.NoError(t, sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, string(text))
		return err
	}))
	var legacyRows []string
	rows, err := conn.QueryContext(ctx, "SELECT sequence, recipient_user_id, recipient_device_id, logical_id, plaintext FROM pending_outbound_message ORDER BY sequence")
	require.NoError(t, err)
	for rows.Next() {
		var (
			seq       int64
			user      string
			dev       int64
			lid, text []byte
		)
		require.NoError(t, rows.Scan(&seq, &user, &dev, &lid, &text))
		id, err := store.ParseLogicalMessageID(lid)
		require.NoError(t, err)
		legacyRows = append(legacyRows, fmt.Sprintf("%d %s %d %s %x", seq, user, dev, id, text))
	}
	require.NoError(t, rows.Err())
	require.Len(t, legacyRows, 9)
	require.NoError(t, conn.Close())

	// The fixture's published test key: secret = bytes 0x00 .. 0x1f.
	k0 := fixturekit.Key()
	k0hex := "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

	// The peer seals the legacy queue.
	sealed := runPeer(t, bin, "-db", path, "-key", k0hex, "dump")
	require.Equal(t, append(legacyRows, "count 9"), sealed, "the peer seals every legacy row as it was")
	conn, err = sql.Open(sqlitedriver.Name, "file:"+path+"?mode=ro")
	require.NoError(t, err)
	var plaintextCols int
	require.NoError(t, conn.QueryRow("SELECT count(*) FROM pragma_table_info('pending_outbound_message') WHERE name = 'plaintext'").Scan(&plaintextCols))
	require.Zero(t, plaintextCols, "the legacy layout is gone")
	require.NoError(t, conn.Close())

	// This driver reads what the peer sealed, and stores more.
	require.Equal(t, sealed, dumpStore(t, path, k0))
	kr, err := seal.NewKeyring(k0)
	require.NoError(t, err)
	s, err := sqlitestore.Open(ctx, path, kr)
	require.NoError(t, err)
	for i := range 3 {
		_, err := s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), fmt.Appendf(nil, "here-%d", i))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	ours := dumpStore(t, path, k0)
	require.Len(t, ours, 9+3+1)
	require.Equal(t, sealed[:9], ours[:9], "the sealed rows are unchanged")

	// The peer reads them and stores more.
	theirs := runPeer(t, bin, "-db", path, "-key", k0hex, "insert", "3", "there")
	require.Len(t, theirs, 9+3+3+1)
	require.Equal(t, ours[:12], theirs[:12], "the peer reads every row this driver stored")
	for i, line := range theirs[12:15] {
		f := strings.Fields(line)
		require.Equal(t, []string{"carol", "3", hex.EncodeToString(fmt.Appendf(nil, "there-%d", i))}, []string{f[1], f[2], f[4]})
	}
	require.Equal(t, "count 15", theirs[15])
	require.Equal(t, theirs, dumpStore(t, path, k0), "this driver reads every row the peer stored")

	// The peer rotates the key; this driver opens with the new one alone.
	k1, k1hex := peerKey(t, "1")
	require.Empty(t, runPeer(t, bin, "-db", path, "-key", k0hex, "-newkey", k1hex, "rotate"))
	require.Equal(t, theirs, dumpStore(t, path, k1))
	old, err := seal.NewKeyring(k0)
	require.NoError(t, err)
	_, err = sqlitestore.Open(ctx, path, old)
	require.Error(t, err, "the old key alone no longer opens the file")

	// This driver rotates; the peer opens with that key.
	k2, k2hex := peerKey(t, "2")
	kr, err = seal.NewKeyring(k1)
	require.NoError(t, err)
	s, err = sqlitestore.Open(ctx, path, kr)
	require.NoError(t, err)
	require.NoError(t, s.RotateKey(ctx, k2, 0, nil))
	require.NoError(t, s.Close())
	require.Equal(t, theirs, runPeer(t, bin, "-db", path, "-key", k2hex, "dump"))

	conn, err = sql.Open(sqlitedriver.Name, "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer conn.Close()
	var check string
	require.NoError(t, conn.QueryRow("PRAGMA integrity_check").Scan(&check))
	require.Equal(t, "ok", check)
}

// The one-writer lock holds between the two drivers: while the peer
// holds the store open, this driver's Open is refused with
// store.ErrInUse; while this driver holds it, the peer's is; once the
// holder closes, the other opens, and finds the file as it was.
func TestCrossDriverLock(t *testing.T) {
	ctx := context.Background()
	bin := buildPeer(t)
	path := filepath.Join(t.TempDir(), "client.db")
	k, khex := peerKey(t, "lock")
	kr, err := seal.NewKeyring(k)
	require.NoError(t, err)
	s, err := sqlitestore.Open(ctx, path, kr)
	require.NoError(t, err)
	_, err = s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), []byte("before"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	before := dumpStore(t, path, k)

	// The peer holds it.
	cmd := exec.Command(bin, "-db", path, "-key", khex, "hold")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill() //nolint:errcheck
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "driverpeer hold: %s", stderr.String())
	require.Equal(t, "held\n", line)
	_, err = sqlitestore.Open(ctx, path, kr)
	require.ErrorIs(t, err, store.ErrInUse, "the peer holds the file")
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait(), "driverpeer hold: %s", stderr.String())

	// This driver holds it.
	s, err = sqlitestore.Open(ctx, path, kr)
	require.NoError(t, err, "the peer released the file")
	require.Equal(t, []string{"inuse"}, runPeer(t, bin, "-db", path, "-key", khex, "try"), "this driver holds the file")
	require.NoError(t, s.Close())
	require.Equal(t, before, runPeer(t, bin, "-db", path, "-key", khex, "dump"), "the peer opens the released file, unchanged")
}
