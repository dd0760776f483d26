package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A pending sequence a file writer raised to the largest int64 under a
// live store fails Send with store.ErrSequenceExhausted (nothing
// stored, nothing handed off) instead of SQLite's "database or disk is
// full"; the restart Open refuses the file with the same error, and
// WithSequenceRestart is the way out: every pending message kept, sends
// work again.
func TestSendSequenceExhausted(t *testing.T) {
	ctx := context.Background()
	net, a, _ := openPair(t, sqliteKind)
	first := a.send(bob, "before")
	_, err := sqliteaccess.DB(a.sql).ExecContext(ctx, "UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = 'pending_outbound_message'")
	require.NoError(t, err)
	sends := len(net.Calls())

	_, err = a.c.Send(ctx, bob, []byte("after"))
	require.ErrorIs(t, err, store.ErrSequenceExhausted)
	assert.Equal(t, []store.LogicalMessageID{first}, a.pendingIDs(nil), "nothing stored")
	assert.Equal(t, sends, len(net.Calls()), "nothing handed off")

	require.NoError(t, a.st.Close())
	_, err = sqlitestore.Open(ctx, a.path, a.kr)
	require.ErrorIs(t, err, store.ErrSequenceExhausted)
	s, err := sqlitestore.Open(ctx, a.path, a.kr, sqlitestore.WithSequenceRestart())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	a.st, a.sql = s, s
	a.c, err = client.Open(ctx, a.config())
	require.NoError(t, err)
	second := a.send(bob, "after the restart")
	assert.Equal(t, []store.LogicalMessageID{first, second}, a.pendingIDs(nil))
}
