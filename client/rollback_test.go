package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
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
			net := transporttest.NewNetwork()
			a := mustOpen(t, net, alice)
			b := mustOpen(t, net, bob)
			converse(t, a, b)
			converse(t, b, a)

			var old []byte
			require.NoError(t, sqliteaccess.DB(b.sql).QueryRowContext(ctx, "SELECT sealed FROM session WHERE user_id = ? AND device_id = ?", alice.UserID, alice.DeviceID).Scan(&old))

			a2 := mustOpen(t, net, alice) // reinstalled: a new identity
			a2.send(bob, "new device")
			_, err := b.c.Poll(ctx)
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.NoError(t, b.acceptChange(alice))

			// The database writer's rollback of the one session row.
			_, err = sqliteaccess.DB(b.sql).ExecContext(ctx, "UPDATE session SET sealed = ? WHERE user_id = ? AND device_id = ?", old, alice.UserID, alice.DeviceID)
			require.NoError(t, err)
			if tt.deletePin {
				_, err = sqliteaccess.DB(b.sql).ExecContext(ctx, "DELETE FROM identity_pin WHERE user_id = ? AND device_id = ?", alice.UserID, alice.DeviceID)
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

// TestSessionRollbackDoesNotRepeatKeystream: a database writer puts
// alice's session row back after she sent a message, so her next message
// is encrypted under the same message key (same ratchet header). The
// relay holds both envelopes: their ciphertexts must not XOR to the XOR of
// the two frames (a repeated keystream). Bob refuses the second envelope
// (its message number was used) and changes nothing; the message stays
// pending and alice's retry delivers it, once.
func TestSessionRollbackDoesNotRepeatKeystream(t *testing.T) {
	for _, tt := range []struct {
		name      string
		confirmed bool // bob answered before the row was saved
	}{
		{"initiating", false},
		{"confirmed", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			net := transporttest.NewNetwork()
			a := mustOpen(t, net, alice)
			b := mustOpen(t, net, bob)
			if tt.confirmed {
				converse(t, a, b)
			} else {
				a.send(bob, "first")
				require.Equal(t, []string{"first"}, messages(t, b.poll()))
				// alice does not poll: her session still initiates.
			}

			var saved []byte
			row := "SELECT sealed FROM session WHERE user_id = ? AND device_id = ?"
			require.NoError(t, sqliteaccess.DB(a.sql).QueryRowContext(ctx, row, bob.UserID, bob.DeviceID).Scan(&saved))
			p1, p2 := "attack at dawn, bring the boats", "retreat at noon, burn the maps!"
			require.Len(t, p2, len(p1))

			net.ResetCalls()
			id1 := a.send(bob, p1)
			_, err := sqliteaccess.DB(a.sql).ExecContext(ctx, "UPDATE session SET sealed = ? WHERE user_id = ? AND device_id = ?", saved, bob.UserID, bob.DeviceID)
			require.NoError(t, err)
			a.reopen()
			id2 := a.send(bob, p2)

			calls := net.Calls()
			require.Len(t, calls, 2)
			e1, err := session.UnmarshalEnvelope(calls[0].Envelope)
			require.NoError(t, err)
			e2, err := session.UnmarshalEnvelope(calls[1].Envelope)
			require.NoError(t, err)
			require.Equal(t, e1.Header, e2.Header, "the rollback reuses the message key")
			f1, f2 := client.MessageFrame(id1, []byte(p1)), client.MessageFrame(id2, []byte(p2))
			require.NotEqual(t, xorBytes(f1, f2), xorBytes(e1.Ciphertext, e2.Ciphertext)[:len(f1)],
				"the relay learns the XOR of the two frames: the keystream was repeated")

			// Bob takes the first, refuses the second without a change.
			res, err := b.c.Poll(ctx)
			require.ErrorIs(t, err, session.ErrReplay)
			require.Equal(t, []string{p1}, messages(t, res))
			finalize(t, b.c, res)
			before := dumpTables(t, sqliteaccess.DB(b.sql))
			_, err = b.c.Receive(ctx, calls[1].Envelope)
			require.ErrorIs(t, err, session.ErrReplay)
			require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "the refused envelope changed bob's database")

			requireCleared(t, a.poll(), true) // the first is acknowledged
			require.Equal(t, []store.LogicalMessageID{id2}, a.pendingIDs(&bob))
			require.Equal(t, []store.LogicalMessageID{id2}, a.retry(bob))
			require.Equal(t, []string{p2}, messages(t, b.poll()))
			requireCleared(t, a.poll(), true)
			require.Zero(t, a.count(&bob))
		})
	}
}

// xorBytes returns a XOR b over their common length.
func xorBytes(a, b []byte) []byte {
	out := make([]byte, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] ^ b[i]
	}
	return out
}
