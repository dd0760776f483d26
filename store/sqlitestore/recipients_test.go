package sqlitestore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/store"
)

// TestRecipientsStorageClasses: rows whose recipient columns hold another
// storage class than the schema declares (a BLOB user id sorts after every
// TEXT one; a TEXT, REAL or BLOB device id sorts after or among the
// integers of its user) name no address: they are not listed, and they
// neither hide nor repeat the recipients around them, on any page size.
func TestRecipientsStorageClasses(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	carol := store.DeviceAddress{UserID: "carol", DeviceID: 3}
	a1 := insert(t, s, alice, 1)
	b := insert(t, s, bob, 2)
	insert(t, s, alice, 3)
	c := insert(t, s, carol, 4)
	twin := `INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
		SELECT %s, %s, randomblob(16), sealed FROM pending_outbound_message WHERE sequence = ?`
	for _, tc := range []struct{ user, device string }{
		{"CAST('bob' AS BLOB)", "2"}, // after every TEXT user id
		{"CAST('alice' AS BLOB)", "1"},
		{"'alice'", "'x'"},             // after alice's integers
		{"'alice'", "1.5"},             // between alice/1 and alice/2
		{"'bob'", "CAST('2' AS BLOB)"}, // after bob's integers
		{"'dave'", "'x'"},              // a user with no readable address
		{"'alice'", "CAST(0 AS BLOB)"},
		{"CAST('' AS BLOB)", "0"}, // the smallest BLOB
	} {
		_, err := sqliteaccess.DB(s).Exec(fmt.Sprintf(twin, tc.user, tc.device), a1.Sequence)
		require.NoError(t, err, "%s, %s", tc.user, tc.device)
	}
	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 12, n, "the twins are stored")

	want := []store.PendingRecipient{
		{Recipient: alice, OldestSequence: a1.Sequence},
		{Recipient: bob, OldestSequence: b.Sequence},
		{Recipient: carol, OldestSequence: c.Sequence},
	}
	for limit := 1; limit <= len(want)+1; limit++ {
		var got []store.PendingRecipient
		req := store.RecipientPageRequest{Limit: limit}
		for {
			p, err := s.PendingRecipients(ctx, req)
			require.NoError(t, err)
			got = append(got, p.Recipients...)
			if p.NextAfterRecipient == nil {
				break
			}
			req.After = p.NextAfterRecipient
		}
		require.Equal(t, want, got, "limit %d", limit)
	}
}
