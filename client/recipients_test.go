package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store"
)

// recipients lists every recipient with pending messages, limit per page.
func (d *device) recipients(limit int) []store.PendingRecipient {
	d.tb.Helper()
	var out []store.PendingRecipient
	req := store.RecipientPageRequest{Limit: limit}
	for {
		p, err := d.c.PendingRecipients(d.tb.Context(), req)
		require.NoError(d.tb, err)
		out = append(out, p.Recipients...)
		if p.NextAfterRecipient == nil {
			return out
		}
		req.After = p.NextAfterRecipient
	}
}

// TestRestartRetryByRecipient is the restart loop: messages to three
// devices fail to hand off, the client restarts (on SQLite, a reopened
// file), lists the recipients with pending messages and retries each.
// Every message arrives once; a recipient stays listed until its
// messages are acknowledged, and the listing then is empty.
func TestRestartRetryByRecipient(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a := openAlice(t, kind)
			b := mustOpenKind(t, kind, net, bob)
			c := mustOpenKind(t, kind, net, carol)
			d := mustOpenKind(t, kind, net, dave)
			first := a.sendFailed(dave, "d1")
			a.sendFailed(bob, "b1")
			a.sendFailed(dave, "d2")
			a.sendFailed(carol, "c1")
			a.sendFailed(bob, "b2")
			if kind == sqliteKind {
				a.reopen()
			}
			pending := a.all(100, nil)
			require.Len(t, pending, 5)
			want := []store.PendingRecipient{
				{Recipient: bob, OldestSequence: pending[1].Sequence},
				{Recipient: carol, OldestSequence: pending[3].Sequence},
				{Recipient: dave, OldestSequence: pending[0].Sequence},
			}
			require.Equal(t, pending[0].ID, first)
			for _, limit := range []int{1, 2, store.MaxPageSize} {
				require.Equal(t, want, a.recipients(limit), "limit %d", limit)
			}

			for _, r := range a.recipients(1) {
				require.Len(t, a.retry(r.Recipient), int(a.count(&r.Recipient)))
			}
			require.Equal(t, []string{"b1", "b2"}, messages(t, b.poll()))
			require.Equal(t, []string{"c1"}, messages(t, c.poll()))
			require.Equal(t, []string{"d1", "d2"}, messages(t, d.poll()))
			require.Equal(t, want, a.recipients(store.MaxPageSize), "pending until acknowledged")
			a.poll()
			require.Empty(t, a.recipients(store.MaxPageSize))
			require.Zero(t, a.count(nil))
		})
	}
}

func TestPendingRecipientsArguments(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a := openAlice(t, kind)
			for _, limit := range []int{0, -1, store.MaxPageSize + 1} {
				_, err := a.c.PendingRecipients(t.Context(), store.RecipientPageRequest{Limit: limit})
				require.ErrorIs(t, err, store.ErrInvalidArgument, "limit %d", limit)
			}
			p, err := a.c.PendingRecipients(t.Context(), store.RecipientPageRequest{After: &store.DeviceAddress{}, Limit: 1})
			require.NoError(t, err, "any address is a position")
			require.Empty(t, p.Recipients)
		})
	}
}
