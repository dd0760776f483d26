package sqlitestore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/store"
)

// TestPeerRowsOfWrongStorageClass: a peer row whose user id or device id
// has another storage class than the schema declares is not matched by
// the typed peer queries. It blocks nothing: Peer sees the part as
// absent, a new value is stored beside it, and DiscardUnreadablePeer
// neither reports nor removes it (key rotation reports it, see
// TestRotateKeySkipsDamagedRows). A sealed value stored as TEXT keeps
// its bytes and opens as before.
func TestPeerRowsOfWrongStorageClass(t *testing.T) {
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 7}
	full := store.PeerState{Session: []byte("session"), Initiation: []byte("initiation"), Pin: []byte("pin")}
	for _, tc := range []struct {
		table, set string
		without    func(store.PeerState) store.PeerState
		fresh      store.PeerState
	}{
		{"session", "user_id = CAST(user_id AS BLOB)", func(p store.PeerState) store.PeerState { p.Session = nil; return p }, store.PeerState{Session: []byte("new session")}},
		{"session", "device_id = CAST(device_id AS BLOB)", func(p store.PeerState) store.PeerState { p.Session = nil; return p }, store.PeerState{Session: []byte("new session")}},
		{"session_initiation", "user_id = CAST(user_id AS BLOB)", func(p store.PeerState) store.PeerState { p.Initiation = nil; return p }, store.PeerState{Initiation: []byte("new initiation")}},
		{"identity_pin", "device_id = CAST(device_id AS BLOB)", func(p store.PeerState) store.PeerState { p.Pin = nil; return p }, store.PeerState{Pin: []byte("new pin")}},
		{"identity_pin", "sealed = CAST(sealed AS TEXT)", func(p store.PeerState) store.PeerState { return p }, store.PeerState{}},
	} {
		t.Run(tc.table+" "+tc.set, func(t *testing.T) {
			ctx := context.Background()
			s := mustOpen(t)
			require.NoError(t, s.SavePeer(ctx, bob, full))
			_, err := sqliteaccess.DB(s).ExecContext(ctx, "UPDATE "+tc.table+" SET "+tc.set)
			require.NoError(t, err)
			rows := func() int {
				var n int
				require.NoError(t, sqliteaccess.DB(s).QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %q", tc.table)).Scan(&n))
				return n
			}

			got, err := s.Peer(ctx, bob)
			require.NoError(t, err, "the row does not block Peer")
			require.Equal(t, tc.without(full), got)
			d, err := storeimpl.DiscardUnreadablePeer(ctx, s, bob, []byte("replacement"), nil)
			require.NoError(t, err)
			require.Equal(t, store.PeerDamage{}, d, "nothing to discard")
			require.Equal(t, 1, rows(), "the row is left alone")

			require.NoError(t, s.SavePeer(ctx, bob, tc.fresh), "a new value is stored beside it")
			got, err = s.Peer(ctx, bob)
			require.NoError(t, err)
			want := tc.without(full)
			if tc.fresh.Session != nil {
				want.Session = tc.fresh.Session
			}
			if tc.fresh.Initiation != nil {
				want.Initiation = tc.fresh.Initiation
			}
			if tc.fresh.Pin != nil {
				want.Pin = tc.fresh.Pin
			}
			require.Equal(t, want, got)
		})
	}
}
