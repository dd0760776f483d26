package client_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/tamper"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// pendingTable is the table the tests below change as a writer of the
// database file would.
const pendingTable = tamper.PendingTable

// insertRawPending stores a pending row as a writer of the file would:
// sealed is whatever bytes it is given, at sequence seq (nil: the next).
func insertRawPending(t *testing.T, d *device, seq *int64, to store.DeviceAddress, sealed []byte) store.LogicalMessageID {
	t.Helper()
	id := store.NewLogicalMessageID()
	_, err := sqliteaccess.DB(d.sql).ExecContext(context.Background(),
		`INSERT INTO `+pendingTable+` (sequence, recipient_user_id, recipient_device_id, logical_id, sealed) VALUES (?, ?, ?, ?, ?)`,
		nullable(seq), to.UserID, to.DeviceID, id[:], sealed)
	require.NoError(t, err)
	return id
}

func nullable(seq *int64) any {
	if seq == nil {
		return sql.NullInt64{}
	}
	return *seq
}

// A database whose recipient column a writer re-declared COLLATE NOCASE
// returns alice's pending message for "Bob" when the client asks for
// "bob", a lookalike account. The client uses a row only if its stored
// recipient is the one asked for, byte for byte: a retry of bob sends
// nothing to bob and reports the row unreadable (store.ErrCorruptRow);
// bob's page and walk report it unreadable instead of listing it as bob's;
// an ACK from bob naming its id, and abandoning (bob, id), clear nothing;
// and the message stays pending for Bob, whose retry delivers it. Using
// the row would send "the door code is 4711" to bob and let his ACK
// delete Bob's row.
func TestLookalikeRecipientRowIsNeverUsed(t *testing.T) {
	ctx := context.Background()
	net, a := openAlice(t, sqliteKind)
	bigBob := store.DeviceAddress{UserID: "Bob", DeviceID: bob.DeviceID}
	realBob := mustOpen(t, net, bigBob)
	lookalike := mustOpen(t, net, bob)

	// alice and the lookalike have a session, so that it can send ACKs.
	a.send(bob, "hello")
	require.Len(t, lookalike.poll(), 1)
	requireCleared(t, a.poll(), true)

	x := a.sendFailed(bigBob, "the door code is 4711")
	doorCode := a.all(store.MaxPageSize, &bigBob)
	require.Len(t, doorCode, 1)
	tamper.RecipientNoCase(t, sqliteaccess.DB(a.sql))
	// A garbage row for bob, which makes a restart loop retry bob.
	garbage := insertRawPending(t, a, nil, bob, []byte("garbage"))
	net.ResetCalls()

	// The retry of bob sends nothing and reports both rows.
	sent, err := a.c.RetryPendingMessages(ctx, bob)
	require.Empty(t, sent)
	require.ErrorIs(t, err, store.ErrUnreadable)
	require.ErrorIs(t, err, store.ErrCorruptRow)
	require.NotErrorIs(t, err, client.ErrMessageNotSent)
	var ue *store.UnreadableError
	require.True(t, errors.As(err, &ue))
	require.Len(t, ue.Entries, 2)
	require.Equal(t, store.PendingMessage{Sequence: doorCode[0].Sequence, Recipient: bigBob, ID: x}, ue.Entries[0].PendingMessage, "reported as stored, without its plaintext")
	require.ErrorIs(t, ue.Entries[0].Cause, store.ErrCorruptRow)
	require.Contains(t, ue.Entries[0].Cause.Error(), `"Bob"`)
	require.Equal(t, garbage, ue.Entries[1].ID)
	require.ErrorIs(t, ue.Entries[1].Cause, seal.ErrMalformed)
	require.Zero(t, sendsTo(net.Calls(), bob), "nothing handed off to bob")
	require.Empty(t, lookalike.poll())

	// bob's page and walk report the row, never as bob's message.
	page, err := a.c.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize, Recipient: &bob})
	require.NoError(t, err)
	require.Empty(t, page.Messages)
	require.Len(t, page.Unreadable, 2)
	require.Equal(t, ue.Entries[0].PendingMessage, page.Unreadable[0].PendingMessage)
	require.ErrorIs(t, page.Unreadable[0].Cause, store.ErrCorruptRow)
	var walked []error
	for m, err := range a.c.AllPendingMessages(ctx, &bob) {
		require.Equal(t, store.PendingMessage{}, m)
		walked = append(walked, err)
	}
	require.Len(t, walked, 2)
	require.ErrorIs(t, walked[0], store.ErrCorruptRow)
	require.ErrorIs(t, walked[1], seal.ErrMalformed)

	// An ACK from bob naming the id, and abandoning (bob, id), clear nothing.
	require.NoError(t, client.SendAck(ctx, lookalike.c, alice, x))
	requireCleared(t, a.poll(), false)
	st, err := a.c.AbandonPending(ctx, bob, x)
	require.NoError(t, err)
	require.Equal(t, client.NotPending, st)
	st, err = a.c.AbandonPendingMessage(ctx, store.PendingMessage{Sequence: doorCode[0].Sequence, Recipient: bob, ID: x})
	require.NoError(t, err)
	require.Equal(t, client.NotPending, st)

	// The message is still Bob's, whole, and his retry delivers it (once
	// the garbage row, which Bob's page lists too, is abandoned).
	st, err = a.c.AbandonPendingMessage(ctx, ue.Entries[1].PendingMessage)
	require.NoError(t, err)
	require.Equal(t, client.Abandoned, st)
	require.Equal(t, doorCode, a.all(store.MaxPageSize, &bigBob))
	require.Equal(t, []store.LogicalMessageID{x}, a.retry(bigBob))
	require.Equal(t, []string{"the door code is 4711"}, messages(t, realBob.poll()))
	requireCleared(t, a.poll(), true)
	require.Empty(t, a.all(store.MaxPageSize, &bigBob))
}

// A walk meets a page of unreadable rows at sequences at and below zero
// (only a writer of the file stores them) before the user's messages, and
// the caller abandons each as it is yielded: the walk goes on to every
// message, once each, in order, and ends without an error. The cursor
// after such a page is zero or negative and names no stored row; the next
// page must take it as a position, not refuse it with ErrInvalidArgument
// before any of the user's messages.
func TestWalkAbandoningRowsAtOrBelowZero(t *testing.T) {
	for _, tt := range []struct {
		name      string
		recipient *store.DeviceAddress
	}{
		{"every recipient", nil},
		{"one recipient", &bob},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			net, a := openAlice(t, sqliteKind)
			mustOpen(t, net, bob)
			// A full page of rows below zero, so that the page ends on a
			// negative cursor, then one at zero.
			var damaged []store.LogicalMessageID
			for seq := -int64(store.MaxPageSize); seq <= 0; seq++ {
				damaged = append(damaged, insertRawPending(t, a, &seq, bob, []byte(fmt.Sprint("garbage ", seq))))
			}
			var want []store.LogicalMessageID
			for i := range 3 {
				want = append(want, a.sendFailed(bob, fmt.Sprint("message ", i)))
			}

			var got, abandoned []store.LogicalMessageID
			for m, err := range a.c.AllPendingMessages(ctx, tt.recipient) {
				var ue *store.UnreadableError
				if errors.As(err, &ue) {
					require.Len(t, ue.Entries, 1)
					st, err := a.c.AbandonPendingMessage(ctx, ue.Entries[0].PendingMessage)
					require.NoError(t, err)
					require.Equal(t, client.Abandoned, st)
					abandoned = append(abandoned, ue.Entries[0].ID)
					continue
				}
				require.NoError(t, err)
				got = append(got, m.ID)
			}
			require.Equal(t, damaged, abandoned, "every damaged row, once, in sequence order")
			require.Equal(t, want, got, "every message, once, in order")
			require.Equal(t, want, a.pendingIDs(nil), "only the damaged rows went")
		})
	}
}
