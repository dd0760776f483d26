package sqlitestore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// fileBytes is the database file, its WAL and its shared-memory file
// (those that exist), by name: what a reader of the files gets.
func fileBytes(t *testing.T, path string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		out[filepath.Base(f)] = b
	}
	return out
}

func anyContains(files map[string][]byte, v []byte) bool {
	for _, b := range files {
		if bytes.Contains(b, v) {
			return true
		}
	}
	return false
}

// A reader of the files without the storage key learns the metadata in
// the clear (who this device talks to) but reads no message, key or
// session: every sealed value's plaintext and the storage key itself are
// in none of the files, while the store is open (WAL not checkpointed)
// and after it is closed.
func TestAtRestReaderReadsNoSecret(t *testing.T) {
	ctx := context.Background()
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	kr, err := seal.NewKeyring(key)
	require.NoError(t, err)
	path := dbPath(t)
	s := mustOpenAt(t, path, kr)

	peer := store.DeviceAddress{UserID: "recipient-in-the-clear", DeviceID: 7}
	secrets := map[string][]byte{
		"message plaintext":     []byte("pending message plaintext 6c1f"),
		"fanned-out plaintext":  []byte("fan-out message plaintext 91ad"),
		"local identity secret": []byte("local identity private keys 0be3"),
		"session":               []byte("double ratchet session state 52d8"),
		"initiation":            []byte("unanswered initiation state 7e04"),
		"identity pin":          []byte("pinned remote identity key a3c9"),
		"storage key":           key.Bytes(),
	}
	require.NoError(t, s.SaveLocalIdentity(ctx, store.LocalIdentity{Address: alice, Secret: secrets["local identity secret"]}))
	_, err = s.CommitSend(ctx, peer, storetest.ID(1), secrets["message plaintext"], store.PeerState{
		Session: secrets["session"], Initiation: secrets["initiation"], Pin: secrets["identity pin"],
	})
	require.NoError(t, err)
	_, err = s.CommitSendMany(ctx, storetest.ID(2), secrets["fanned-out plaintext"], []store.PeerUpdate{{Peer: bob, Update: store.PeerState{Session: []byte("s")}}})
	require.NoError(t, err)

	for _, when := range []struct {
		name  string
		files func(t *testing.T) map[string][]byte
	}{
		{"store open", func(t *testing.T) map[string][]byte { return fileBytes(t, path) }},
		{"store closed", func(t *testing.T) map[string][]byte {
			require.NoError(t, s.Close())
			return fileBytes(t, path)
		}},
	} {
		files := when.files(t)
		require.True(t, anyContains(files, []byte(peer.UserID)), "%s: the recipient is metadata in the clear (the scan reads the rows)", when.name)
		for name, v := range secrets {
			require.False(t, anyContains(files, v), "%s: %s is in the files", when.name, name)
		}
	}
}

// Deletion is logical: secure_delete is off, so after an abandon and a
// wal_checkpoint(TRUNCATE) the deleted row's bytes (its ids in the clear,
// its sealed value) are still in the main database file. Only the sealed
// value's plaintext is not.
func TestDeletedRowLeavesResidue(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	s := mustOpenAt(t, path, storetest.NewKeyring(t))
	conn := sqliteaccess.DB(s)

	var secureDelete int
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA secure_delete").Scan(&secureDelete))
	require.Zero(t, secureDelete, "secure_delete is off, as SECURITY.md says")

	gone := insert(t, s, bob, 1)
	insert(t, s, bob, 2)
	insert(t, s, alice, 3)
	var sealed []byte
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT sealed FROM pending_outbound_message WHERE sequence = ?", gone.Sequence).Scan(&sealed))

	ok, err := s.AbandonPending(ctx, gone.Recipient, gone.ID)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	wal, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Zero(t, wal.Size(), "the checkpoint moved everything into the main file")

	main, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		value []byte
		kept  bool
	}{
		{"logical id", gone.ID[:], true},
		{"sealed value", sealed, true},
		{"plaintext", gone.Plaintext, false},
	} {
		require.Equal(t, tc.kept, bytes.Contains(main, tc.value), "%s of the abandoned row in the main file", tc.name)
	}
}
