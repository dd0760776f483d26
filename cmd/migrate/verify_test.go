package main

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/tamper"
)

// verify passes a sound head database and, once a writer of the file has
// pointed the processed-id index at a b-tree of its own (every text the
// migrations', no root shared: drift and Open see nothing), exits 1 naming
// the index and its table, in text and JSON, the file unchanged.
func TestVerifyFindsForgedIndex(t *testing.T) {
	path := headDB(t, `INSERT INTO processed_inbound_message (sender_user_id, sender_device_id, logical_id, processed_at) VALUES ('bob', 2, zeroblob(16), 1)`)
	code, stdout, stderr := runCmd(t, "verify", "-db", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "verified: ")
	require.Contains(t, stdout, ", 0 problem(s)")

	tamper.ForgeIndex(t, path, "sqlite_autoindex_processed_inbound_message_1", "sender_user_id, sender_device_id, logical_id",
		[]any{1, "carol", 7, make([]byte, 16)})
	before := fileDigest(t, path)
	code, stdout, stderr = runCmd(t, "verify", "-db", path)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "table processed_inbound_message: ")
	require.Contains(t, stderr, "sqlite_autoindex_processed_inbound_message_1")

	code, stdout, _ = runCmd(t, "verify", "-db", path, "-json")
	require.Equal(t, 1, code)
	var doc verifyDoc
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	require.False(t, doc.OK)
	require.Positive(t, doc.Tables)
	require.NotEmpty(t, doc.Problems)
	for _, p := range doc.Problems {
		require.Contains(t, p, "table processed_inbound_message: ")
	}
	require.Equal(t, before, fileDigest(t, path), "verify writes nothing")
}

// fileDigest is the SHA-256 of the file at path.
func fileDigest(t *testing.T, path string) [sha256.Size]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}
