package storetest

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// sealFor seals text as the pending row (to, id) with keys, as the store
// would: the starting point of a damaged value.
func sealFor(t *testing.T, keys seal.Sealer, to store.DeviceAddress, id store.LogicalMessageID, text []byte) []byte {
	t.Helper()
	v, err := keys.Seal(seal.RecordPendingOutbound, seal.MessageAD(to.UserID, to.DeviceID, id), text)
	require.NoError(t, err)
	return v
}

// entry is one row of a page as the walks below see it: a message or an
// unreadable row.
type entry struct {
	seq        int64
	unreadable bool
}

func entries(p store.PendingMessagePage) []entry {
	var out []entry
	for _, m := range p.Messages {
		out = append(out, entry{m.Sequence, false})
	}
	for _, u := range p.Unreadable {
		out = append(out, entry{u.Sequence, true})
	}
	return out
}

// walk pages through the queue from the start with limit, checking each
// page's cursor, and returns every row seen, in order.
func (h *harness) walk(limit int, recipient *store.DeviceAddress) []entry {
	h.t.Helper()
	var out []entry
	req := store.PageRequest{Limit: limit, Recipient: recipient}
	for i := 0; ; i++ {
		require.Less(h.t, i, 1000, "the walk does not end")
		p := h.page(req)
		es := entries(p)
		require.LessOrEqual(h.t, len(es), limit, "unreadable rows count toward the limit")
		for j := 1; j < len(p.Messages); j++ {
			require.Less(h.t, p.Messages[j-1].Sequence, p.Messages[j].Sequence)
		}
		for j := 1; j < len(p.Unreadable); j++ {
			require.Less(h.t, p.Unreadable[j-1].Sequence, p.Unreadable[j].Sequence)
		}
		out = append(out, es...)
		if p.NextAfterSequence == nil {
			return sortEntries(out)
		}
		require.Len(h.t, es, limit, "a page with more behind it is full")
		last := es[0].seq
		for _, e := range es {
			last = max(last, e.seq)
		}
		require.Equal(h.t, last, *p.NextAfterSequence, "the cursor is the page's last sequence, readable or not")
		req.After = p.NextAfterSequence
	}
}

func sortEntries(es []entry) []entry {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].seq < es[j-1].seq; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	return es
}

// nextWalk follows NextPendingMessage for to from the start, stepping past
// unreadable rows, and returns every row seen.
func (h *harness) nextWalk(to store.DeviceAddress) []entry {
	h.t.Helper()
	var out []entry
	var after *int64
	for i := 0; ; i++ {
		require.Less(h.t, i, 1000)
		m, err := h.s.NextPendingMessage(h.ctx, to, after)
		var ue *store.UnreadableError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return out
		case errors.As(err, &ue):
			require.ErrorIs(h.t, err, store.ErrUnreadable)
			require.Len(h.t, ue.Entries, 1)
			require.Equal(h.t, store.PendingMessage{}, m, "no plaintext with an unreadable row")
			out = append(out, entry{ue.Entries[0].Sequence, true})
			after = &ue.Entries[0].Sequence
		default:
			require.NoError(h.t, err)
			out = append(out, entry{m.Sequence, false})
			after = &m.Sequence
		}
	}
}

// testUnreadableRows damages one row in each way a store can meet and
// checks that pages, walks and NextPendingMessage report it in place, with its
// recipient, id, sequence and a cause errors.Is matches, that the others
// open unchanged, that counts are unchanged, and that it can be deleted.
func testUnreadableRows(t *testing.T, h *harness) {
	foreign := NewKeyring(t)
	for _, tc := range []struct {
		name string
		// tamper damages m and returns the recipient the row now names.
		tamper func(t *testing.T, m msg) store.DeviceAddress
		want   error
	}{
		{"bit flipped in the ciphertext", func(t *testing.T, m msg) store.DeviceAddress {
			v := sealFor(t, h.keys, m.to, m.id, m.text)
			v[len(v)-5] ^= 0x01
			h.tamper.SetSealed(t, h.s, m.seq, v)
			return m.to
		}, seal.ErrAuthentication},
		{"sealed for another row", func(t *testing.T, m msg) store.DeviceAddress {
			h.tamper.SetSealed(t, h.s, m.seq, sealFor(t, h.keys, bob, m.id, m.text))
			return m.to
		}, seal.ErrAuthentication},
		{"truncated", func(t *testing.T, m msg) store.DeviceAddress {
			h.tamper.SetSealed(t, h.s, m.seq, sealFor(t, h.keys, m.to, m.id, m.text)[:7])
			return m.to
		}, seal.ErrTruncated},
		{"not a sealed record", func(t *testing.T, m msg) store.DeviceAddress {
			v := sealFor(t, h.keys, m.to, m.id, m.text)
			copy(v, "XXXX")
			h.tamper.SetSealed(t, h.s, m.seq, v)
			return m.to
		}, seal.ErrMalformed},
		{"unknown format version", func(t *testing.T, m msg) store.DeviceAddress {
			v := sealFor(t, h.keys, m.to, m.id, m.text)
			v[4] = seal.Version + 1
			h.tamper.SetSealed(t, h.s, m.seq, v)
			return m.to
		}, seal.ErrUnknownVersion},
		{"sealed with a key the keyring does not hold", func(t *testing.T, m msg) store.DeviceAddress {
			h.tamper.SetSealed(t, h.s, m.seq, sealFor(t, foreign, m.to, m.id, m.text))
			return m.to
		}, seal.ErrWrongKey},
		{"malformed recipient", func(t *testing.T, m msg) store.DeviceAddress {
			h.tamper.SetUserID(t, h.s, m.seq, "")
			return store.DeviceAddress{UserID: "", DeviceID: m.to.DeviceID}
		}, store.ErrCorruptRow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range h.all(nil) {
				ok, err := h.s.AbandonPending(h.ctx, m.Recipient, m.ID)
				require.NoError(t, err)
				require.True(t, ok)
			}
			ms := h.seed(5, alice, bob) // alice: 0, 2, 4
			bad := ms[2]
			to := tc.tamper(t, bad)
			good := []msg{ms[0], ms[1], ms[3], ms[4]}

			// One page: the readable rows as messages, the damaged one
			// in place as unreadable; only the returned rows are opened.
			var p store.PendingMessagePage
			opened := h.opens(func() { p = h.page(store.PageRequest{Limit: store.MaxPageSize}) })
			require.Equal(t, pendings(good...), p.Messages)
			require.Nil(t, p.NextAfterSequence)
			require.Len(t, p.Unreadable, 1)
			u := p.Unreadable[0]
			require.ErrorIs(t, u.Cause, tc.want)
			if tc.want != store.ErrCorruptRow {
				require.NotErrorIs(t, u.Cause, store.ErrCorruptRow)
			}
			require.Equal(t, store.UnreadablePendingMessage{PendingMessage: store.PendingMessage{Sequence: bad.seq, Recipient: to, ID: bad.id}, Cause: u.Cause}, u)
			if errors.Is(tc.want, store.ErrCorruptRow) {
				require.EqualValues(t, 4, opened, "a corrupt row is not even opened")
			} else {
				require.EqualValues(t, 5, opened)
			}

			// Walks of every page size see every row once, in order.
			want := []entry{{ms[0].seq, false}, {ms[1].seq, false}, {bad.seq, true}, {ms[3].seq, false}, {ms[4].seq, false}}
			for _, limit := range []int{1, 2, 3, store.MaxPageSize} {
				require.Equal(t, want, h.walk(limit, nil), "limit %d", limit)
			}
			// The recipient's own page and retry walk step past it too.
			aliceWant := []entry{{ms[0].seq, false}, {bad.seq, true}, {ms[4].seq, false}}
			if to != alice {
				aliceWant = []entry{{ms[0].seq, false}, {ms[4].seq, false}}
			}
			require.Equal(t, aliceWant, h.walk(1, ptr(alice)))
			require.Equal(t, aliceWant, h.nextWalk(alice))
			require.Equal(t, []entry{{ms[1].seq, false}, {ms[3].seq, false}}, h.nextWalk(bob))

			// Counts open nothing: unchanged.
			require.EqualValues(t, 5, h.count(nil))

			// Deleting it, by what the page reported, leaves the others.
			if to.Validate() == nil {
				ok, err := h.s.AbandonPending(h.ctx, u.Recipient, u.ID)
				require.NoError(t, err)
				require.True(t, ok)
			} else {
				_, err := h.s.AbandonPending(h.ctx, u.Recipient, u.ID)
				require.ErrorIs(t, err, store.ErrInvalidArgument, "a malformed recipient is refused, not looked up")
				ok, err := h.s.AbandonPendingMessage(h.ctx, u.PendingMessage)
				require.NoError(t, err)
				require.True(t, ok)
			}
			require.Equal(t, pendings(good...), h.all(nil))
			require.EqualValues(t, 4, h.count(nil))
			ok, err := h.s.AbandonPendingMessage(h.ctx, u.PendingMessage)
			require.NoError(t, err)
			require.False(t, ok, "gone")
		})
	}
}

// testUnreadableCursorWalk: a queue of only damaged rows still pages to
// its end, one row per page, and each can be deleted by sequence.
func testUnreadableCursorWalk(t *testing.T, h *harness) {
	foreign := NewKeyring(t)
	ms := h.seed(4, alice, bob)
	for _, m := range ms {
		h.tamper.SetSealed(t, h.s, m.seq, sealFor(t, foreign, m.to, m.id, m.text))
	}
	var want []entry
	for _, m := range ms {
		want = append(want, entry{m.seq, true})
	}
	require.Equal(t, want, h.walk(1, nil))
	p := h.page(store.PageRequest{Limit: 1})
	require.Empty(t, p.Messages)
	require.Equal(t, &ms[0].seq, p.NextAfterSequence)
	for _, m := range ms {
		ok, err := h.s.AbandonPendingMessage(h.ctx, store.PendingMessage{Sequence: m.seq, Recipient: m.to, ID: m.id})
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Zero(t, h.count(nil))
	requirePage(t, nil, nil, h.page(store.PageRequest{Limit: 10}))
}

// testSequenceAtOrBelowZero: a row moved to sequence 0 or below (never
// handed out) is still in every walk from the start, first, and in the
// recipient's retry walk: counted rows are never invisible.
func testSequenceAtOrBelowZero(t *testing.T, h *harness) {
	ms := h.seed(5, alice, bob)
	h.tamper.SetSequence(t, h.s, ms[3].seq, 0)
	h.tamper.SetSequence(t, h.s, ms[4].seq, -5)
	h.tamper.SetSequence(t, h.s, ms[2].seq, math.MinInt64)
	moved := func(m msg, seq int64) msg { m.seq = seq; return m }
	want := pendings(moved(ms[2], math.MinInt64), moved(ms[4], -5), moved(ms[3], 0), ms[0], ms[1])
	require.EqualValues(t, 5, h.count(nil))
	require.Equal(t, want, h.all(nil))
	for _, limit := range []int{1, 2, 4} {
		var got []entry
		for _, e := range h.walk(limit, nil) {
			require.False(t, e.unreadable)
			got = append(got, e)
		}
		require.Equal(t, []entry{{math.MinInt64, false}, {-5, false}, {0, false}, {ms[0].seq, false}, {ms[1].seq, false}}, got, "limit %d", limit)
	}
	// alice: ms[0], ms[2], ms[4]; bob: ms[1], ms[3].
	require.Equal(t, []entry{{math.MinInt64, false}, {-5, false}, {ms[0].seq, false}}, h.nextWalk(alice))
	require.Equal(t, []entry{{0, false}, {ms[1].seq, false}}, h.nextWalk(bob))
	require.Equal(t, []entry{{math.MinInt64, false}, {-5, false}, {ms[0].seq, false}}, h.walk(1, ptr(alice)))
	// A cursor of 0 is after the rows at or below zero.
	requirePage(t, pendings(ms[0], ms[1]), nil, h.page(store.PageRequest{After: ptr(int64(0)), Limit: 10}))
}

// testNegativeCursor: a negative cursor is refused unless a row with a
// negative sequence is stored (it is then the cursor of a page that
// ended on one).
func testNegativeCursor(t *testing.T, h *harness) {
	ms := h.seed(3, alice, bob)
	for _, req := range []store.PageRequest{
		{After: ptr(int64(-1)), Limit: 10},
		{After: ptr(int64(math.MinInt64)), Limit: 10, Recipient: ptr(alice)},
	} {
		_, err := h.s.PendingMessages(h.ctx, req)
		require.ErrorIs(t, err, store.ErrInvalidArgument, "%+v", req)
	}
	_, err := h.s.NextPendingMessage(h.ctx, alice, ptr(int64(-1)))
	require.ErrorIs(t, err, store.ErrInvalidArgument)

	h.tamper.SetSequence(t, h.s, ms[0].seq, -3)
	p := h.page(store.PageRequest{Limit: 1})
	require.Equal(t, ptr(int64(-3)), p.NextAfterSequence)
	moved := ms[0]
	moved.seq = -3
	requirePage(t, pendings(moved), ptr(int64(-3)), p)
	requirePage(t, pendings(ms[1], ms[2]), nil, h.page(store.PageRequest{After: ptr(int64(-3)), Limit: 10}))
	m, err := h.s.NextPendingMessage(h.ctx, alice, ptr(int64(-3)))
	require.NoError(t, err)
	require.Equal(t, ms[2].pending(), m)
	requirePage(t, pendings(moved, ms[1], ms[2]), nil, h.page(store.PageRequest{After: ptr(int64(-10)), Limit: 10}))

	// Once no negative sequence is stored, a negative cursor is a mistake again.
	ok, err := h.s.AbandonPending(h.ctx, alice, ms[0].id)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = h.s.PendingMessages(h.ctx, store.PageRequest{After: ptr(int64(-3)), Limit: 10})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}
