package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, keys seal.RotatingSealer) store.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "client.db"), keys)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, sqlTamper{})
}

// sqlTamper damages rows with plain SQL behind the store's back, as anyone
// with write access to the database file could.
type sqlTamper struct{}

func (sqlTamper) exec(t *testing.T, s store.Store, query string, args ...any) {
	t.Helper()
	res, err := sqliteaccess.DB(s.(*sqlitestore.Store)).Exec(query, args...)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "%s %v", query, args)
}

func (tp sqlTamper) SetSealed(t *testing.T, s store.Store, seq int64, sealed []byte) {
	tp.exec(t, s, `UPDATE pending_outbound_message SET sealed = ? WHERE sequence = ?`, sealed, seq)
}

func (tp sqlTamper) SetSequence(t *testing.T, s store.Store, seq, to int64) {
	tp.exec(t, s, `UPDATE pending_outbound_message SET sequence = ? WHERE sequence = ?`, to, seq)
}

func (tp sqlTamper) SetUserID(t *testing.T, s store.Store, seq int64, user string) {
	tp.exec(t, s, `UPDATE pending_outbound_message SET recipient_user_id = ? WHERE sequence = ?`, user, seq)
}

func (tp sqlTamper) SetInboundSealed(t *testing.T, s store.Store, seq int64, sealed []byte) {
	tp.exec(t, s, `UPDATE pending_inbound_message SET sealed = ? WHERE sequence = ?`, sealed, seq)
}

func (tp sqlTamper) SetPeerSealed(t *testing.T, s store.Store, peer store.DeviceAddress, part store.PeerPart, sealed []byte) {
	table := map[store.PeerPart]string{store.PeerSession: "session", store.PeerInitiation: "session_initiation", store.PeerPin: "identity_pin"}[part]
	require.NotEmpty(t, table, "%s", part)
	tp.exec(t, s, `UPDATE `+table+` SET sealed = ? WHERE user_id = ? AND device_id = ?`, sealed, peer.UserID, peer.DeviceID)
}
