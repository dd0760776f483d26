package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/transport"
)

// TestSessionRollbackAfterAcceptedIdentityChange: bob accepts alice's
// new identity; a database writer (no storage key) puts back bob's older
// sealed session row for alice, from before the accept (a valid sealed
// copy of the same row: the associated data binds it to the row, not to a
// version). The pin still holds the new identity, so bob must not encrypt
// to the old one (the old device must not read what bob sends next), nor
// take the old device's messages as alice's.
func TestSessionRollbackAfterAcceptedIdentityChange(t *testing.T) {
	for _, tt := range []struct {
		name      string
		deletePin bool // the writer also deletes the pin row
	}{
		{"session row put back", false},
		{"session row put back, pin row deleted", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			net := transport.NewNetwork()
			a := mustOpen(t, net, alice)
			b := mustOpen(t, net, bob)
			converse(t, a, b)
			converse(t, b, a)

			var old []byte
			require.NoError(t, b.sql.DB().QueryRowContext(ctx, "SELECT sealed FROM session WHERE user_id = ? AND device_id = ?", alice.UserID, alice.DeviceID).Scan(&old))

			a2 := mustOpen(t, net, alice) // reinstalled: a new identity
			a2.send(bob, "new device")
			_, err := b.c.Poll(ctx)
			require.ErrorIs(t, err, client.ErrIdentityChanged)
			require.NoError(t, b.acceptChange(alice))

			// The database writer's rollback of the one session row.
			_, err = b.sql.DB().ExecContext(ctx, "UPDATE session SET sealed = ? WHERE user_id = ? AND device_id = ?", old, alice.UserID, alice.DeviceID)
			require.NoError(t, err)
			if tt.deletePin {
				_, err = b.sql.DB().ExecContext(ctx, "DELETE FROM identity_pin WHERE user_id = ? AND device_id = ?", alice.UserID, alice.DeviceID)
				require.NoError(t, err)
			}
			b.reopen()

			t.Run("send", func(t *testing.T) {
				_, _ = b.c.Send(ctx, alice, []byte("for the new device only"))
				res, _ := a.c.Poll(ctx) // the old device, still holding its session
				require.NotContains(t, messages(t, res), "for the new device only", "the old identity read a message sent after its replacement was accepted")
			})
			t.Run("receive", func(t *testing.T) {
				_, _ = a.c.Send(ctx, bob, []byte("from the replaced identity"))
				res, _ := b.c.Poll(ctx)
				require.NotContains(t, messages(t, res), "from the replaced identity", "a message of the replaced identity was given to the app as alice's")
			})
		})
	}
}
