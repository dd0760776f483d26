package storetest

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store"
)

// Addresses whose order tests the comparison the stores share: user ids
// byte by byte (an upper-case letter sorts before every lower-case one, a
// prefix before its extensions, a multi-byte character after ASCII), then
// device ids as numbers (10 after 9).
var (
	upper    = store.DeviceAddress{UserID: "Zed", DeviceID: 3}
	alice9   = store.DeviceAddress{UserID: "alice", DeviceID: 9}
	alice10  = store.DeviceAddress{UserID: "alice", DeviceID: 10}
	aliceExt = store.DeviceAddress{UserID: "alice2", DeviceID: 0}
	accent   = store.DeviceAddress{UserID: "\u00e9lise", DeviceID: 1}
)

// recipientOrder is every address the recipient tests send to, in the
// order the stores list them.
var recipientOrder = []store.DeviceAddress{upper, alice, aliceTwo, alice9, alice10, aliceExt, bob, accent}

func (h *harness) recipients(req store.RecipientPageRequest) store.PendingRecipientPage {
	h.t.Helper()
	p, err := h.s.PendingRecipients(h.ctx, req)
	require.NoError(h.t, err)
	return p
}

// allRecipients lists every recipient page by page of limit, following
// the cursor, and checks each page's cursor.
func (h *harness) allRecipients(limit int) []store.PendingRecipient {
	h.t.Helper()
	var out []store.PendingRecipient
	req := store.RecipientPageRequest{Limit: limit}
	for i := 0; ; i++ {
		require.Less(h.t, i, 1000, "listing does not end")
		p := h.recipients(req)
		require.LessOrEqual(h.t, len(p.Recipients), limit)
		out = append(out, p.Recipients...)
		if p.NextAfterRecipient == nil {
			return out
		}
		require.Len(h.t, p.Recipients, limit, "a page with more behind it is full")
		require.Equal(h.t, p.Recipients[limit-1].Recipient, *p.NextAfterRecipient)
		req.After = p.NextAfterRecipient
	}
}

// expectedRecipients returns the recipients of ms, in address order, each
// with its smallest sequence.
func expectedRecipients(ms []msg) []store.PendingRecipient {
	oldest := map[store.DeviceAddress]int64{}
	for _, m := range ms {
		if s, ok := oldest[m.to]; !ok || m.seq < s {
			oldest[m.to] = m.seq
		}
	}
	var out []store.PendingRecipient
	for _, a := range recipientOrder {
		if s, ok := oldest[a]; ok {
			out = append(out, store.PendingRecipient{Recipient: a, OldestSequence: s})
		}
	}
	return out
}

// seedRecipients sends n messages round-robin over the recipients in an
// order unlike the listing's, so that no recipient's oldest message is
// the first sent.
func (h *harness) seedRecipients(n int) []msg {
	h.t.Helper()
	to := slices.Clone(recipientOrder)
	slices.Reverse(to)
	to[0], to[3] = to[3], to[0]
	return h.seed(n, to...)
}

func testRecipientsPaged(t *testing.T, h *harness) {
	require.Nil(t, h.recipients(store.RecipientPageRequest{Limit: 1}).Recipients, "an empty queue has no recipient")
	require.Nil(t, h.recipients(store.RecipientPageRequest{Limit: 1}).NextAfterRecipient)

	ms := h.seedRecipients(3 * len(recipientOrder))
	want := expectedRecipients(ms)
	require.Len(t, want, len(recipientOrder))
	for _, limit := range []int{1, 2, 3, len(recipientOrder), store.MaxPageSize} {
		var got []store.PendingRecipient
		opens := h.opens(func() { got = h.allRecipients(limit) })
		require.Equal(t, want, got, "limit %d", limit)
		require.Zero(t, opens, "listing recipients opens no message")
	}

	for _, tc := range []struct {
		name  string
		req   store.RecipientPageRequest
		want  []store.PendingRecipient
		after *store.DeviceAddress
	}{
		{"first page", store.RecipientPageRequest{Limit: 3}, want[:3], &want[2].Recipient},
		{"exactly the last page", store.RecipientPageRequest{After: &want[2].Recipient, Limit: len(want) - 3}, want[3:], nil},
		{"after an address not stored", store.RecipientPageRequest{After: &store.DeviceAddress{UserID: "alice", DeviceID: 3}, Limit: 2}, want[3:5], &want[4].Recipient},
		{"same user, next device", store.RecipientPageRequest{After: &alice, Limit: 1}, want[2:3], &want[2].Recipient},
		{"after the last", store.RecipientPageRequest{After: &accent, Limit: 5}, nil, nil},
		{"after every address", store.RecipientPageRequest{After: &store.DeviceAddress{UserID: "\U0010ffff", DeviceID: math.MaxInt64}, Limit: 5}, nil, nil},
		{"a malformed cursor is a position", store.RecipientPageRequest{After: &store.DeviceAddress{UserID: "", DeviceID: -5}, Limit: 1}, want[:1], &want[0].Recipient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := h.recipients(tc.req)
			require.Equal(t, tc.want, p.Recipients)
			require.Equal(t, tc.after, p.NextAfterRecipient)
		})
	}
}

// The oldest sequence follows deletes, a recipient whose last message
// goes is no longer listed, and nothing else changes.
func testRecipientsAfterDelete(t *testing.T, h *harness) {
	ms := h.seed(6, alice, bob, aliceTwo)
	before := h.all(nil)
	del := func(m msg) {
		ok, err := h.s.AbandonPending(h.ctx, m.to, m.id)
		require.NoError(t, err)
		require.True(t, ok)
	}
	del(ms[0]) // alice's oldest
	require.Equal(t, []store.PendingRecipient{
		{Recipient: alice, OldestSequence: ms[3].seq},
		{Recipient: aliceTwo, OldestSequence: ms[2].seq},
		{Recipient: bob, OldestSequence: ms[1].seq},
	}, h.allRecipients(store.MaxPageSize))
	del(ms[1])
	del(ms[4]) // bob's last
	require.Equal(t, []store.PendingRecipient{
		{Recipient: alice, OldestSequence: ms[3].seq},
		{Recipient: aliceTwo, OldestSequence: ms[2].seq},
	}, h.allRecipients(store.MaxPageSize))
	require.Equal(t, pendings(ms[2], ms[3], ms[5]), h.all(nil))
	require.Len(t, before, 6)
}

// Between pages: a recipient already listed loses its messages, one not
// yet reached loses its last, one not yet reached gets its first, one
// already passed gets its first. Every recipient pending throughout is
// listed exactly once; the one that went is absent; the new one ahead
// appears, the new one behind does not.
func testRecipientsUnderMutation(t *testing.T, h *harness) {
	ms := h.seed(4, alice, aliceTwo, alice10, bob)
	p := h.recipients(store.RecipientPageRequest{Limit: 2})
	require.Equal(t, []store.DeviceAddress{alice, aliceTwo}, addresses(p.Recipients))
	for _, m := range []msg{ms[0], ms[2]} { // alice (listed), alice10 (ahead)
		ok, err := h.s.AbandonPending(h.ctx, m.to, m.id)
		require.NoError(t, err)
		require.True(t, ok)
	}
	late := h.insert(aliceExt, 100) // ahead of the cursor
	h.insert(upper, 101)            // behind it
	rest := h.recipients(store.RecipientPageRequest{After: p.NextAfterRecipient, Limit: 2})
	require.Equal(t, []store.PendingRecipient{
		{Recipient: aliceExt, OldestSequence: late.seq},
		{Recipient: bob, OldestSequence: ms[3].seq},
	}, rest.Recipients)
	require.Nil(t, rest.NextAfterRecipient)
}

func addresses(rs []store.PendingRecipient) []store.DeviceAddress {
	var out []store.DeviceAddress
	for _, r := range rs {
		out = append(out, r.Recipient)
	}
	return out
}

func testRecipientsInvalidArgument(t *testing.T, h *harness) {
	h.seed(2, alice, bob)
	for _, limit := range []int{-1, 0, store.MaxPageSize + 1} {
		_, err := h.s.PendingRecipients(h.ctx, store.RecipientPageRequest{Limit: limit})
		require.ErrorIs(t, err, store.ErrInvalidArgument, "limit %d", limit)
	}
	p := h.recipients(store.RecipientPageRequest{Limit: store.MaxPageSize})
	require.Equal(t, []store.DeviceAddress{alice, bob}, addresses(p.Recipients))
}

// A row stored with a malformed recipient (a damaged row) is listed under
// its address as stored, in its place in the order, so that nothing
// pending is hidden; its cursor continues the listing.
func testRecipientsMalformed(t *testing.T, h *harness) {
	ms := h.seed(3, alice, bob)
	h.tamper.SetUserID(t, h.s, ms[1].seq, "")
	empty := store.DeviceAddress{UserID: "", DeviceID: bob.DeviceID}
	require.Error(t, empty.Validate())
	want := []store.PendingRecipient{
		{Recipient: empty, OldestSequence: ms[1].seq},
		{Recipient: alice, OldestSequence: ms[0].seq},
	}
	require.Equal(t, want, h.allRecipients(1))
	require.Equal(t, want, h.allRecipients(store.MaxPageSize))
}

func testRecipientsClosed(t *testing.T, h *harness) {
	h.seed(1, alice)
	require.NoError(t, h.s.Close())
	_, err := h.s.PendingRecipients(h.ctx, store.RecipientPageRequest{Limit: 1})
	require.ErrorIs(t, err, store.ErrClosed)
}

// A recipient whose oldest message cannot be opened is listed with that
// message's sequence: the listing opens nothing, and an unreadable message
// is as pending as any.
func testRecipientsUnreadable(t *testing.T, h *harness) {
	ms := h.seed(4, alice, bob)
	h.tamper.SetSealed(t, h.s, ms[0].seq, []byte("not a sealed record"))
	var got []store.PendingRecipient
	opens := h.opens(func() { got = h.allRecipients(1) })
	require.Zero(t, opens)
	require.Equal(t, []store.PendingRecipient{
		{Recipient: alice, OldestSequence: ms[0].seq},
		{Recipient: bob, OldestSequence: ms[1].seq},
	}, got)
}
