package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// forgetKey makes kr seal with a new key and forget the one it sealed
// with: every value sealed before becomes unreadable (seal.ErrWrongKey),
// as if the key had been lost, while the store goes on working.
func forgetKey(t *testing.T, kr *seal.Keyring) {
	t.Helper()
	k, err := seal.GenerateKey()
	require.NoError(t, err)
	old := kr.Current()
	kr.Add(k)
	require.NoError(t, kr.Forget(old))
}

// unreadableSetup is alice with four pending messages: lost to bob (its
// key forgotten: unreadable), then two to bob and one to carol, all
// readable, their hand-offs failed. Nothing else alice stores for bob or
// carol was sealed with the forgotten key.
type unreadableSetup struct {
	ctx             context.Context
	net             *transporttest.Network
	a, b            *device
	lost            store.LogicalMessageID
	two, three, car store.LogicalMessageID
}

func newUnreadableSetup(t *testing.T, kind storeKind) *unreadableSetup {
	t.Helper()
	s := &unreadableSetup{ctx: context.Background(), net: transporttest.NewNetwork()}
	s.a = mustOpenKind(t, kind, s.net, alice)
	s.b = mustOpenKind(t, kind, s.net, bob)
	mustOpenKind(t, kind, s.net, carol)
	// No bundle: stored alone, before any session or pin of bob.
	s.net.FailNextFetches(1)
	var err error
	s.lost, err = s.a.c.Send(s.ctx, bob, []byte("lost"))
	require.ErrorIs(t, err, client.ErrMessageNotSent)
	forgetKey(t, s.a.kr)
	s.two = s.a.sendFailed(bob, "two")
	s.car = s.a.sendFailed(carol, "to carol")
	s.three = s.a.sendFailed(bob, "three")
	return s
}

func (s *unreadableSetup) page(t *testing.T, req store.PageRequest) store.PendingMessagePage {
	t.Helper()
	p, err := s.a.c.PendingMessages(s.ctx, req)
	require.NoError(t, err)
	return p
}

func pageIDs(p store.PendingMessagePage) []store.LogicalMessageID {
	var out []store.LogicalMessageID
	for _, m := range p.Messages {
		out = append(out, m.ID)
	}
	return out
}

// requireLost checks that us is exactly the lost message, unreadable for
// a forgotten key.
func requireLost(t *testing.T, s *unreadableSetup, us []store.UnreadablePendingMessage) {
	t.Helper()
	require.Len(t, us, 1)
	require.Equal(t, bob, us[0].Recipient)
	require.Equal(t, s.lost, us[0].ID)
	require.ErrorIs(t, us[0].Cause, seal.ErrWrongKey)
	require.NotErrorIs(t, us[0].Cause, seal.ErrAuthentication)
}

// TestPagesReportUnreadable: a message that cannot be opened is returned
// in the page, in place, counting toward the limit, and the cursor moves
// past it, even with Limit 1; the count is unchanged.
func TestPagesReportUnreadable(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			s := newUnreadableSetup(t, kind)
			all := s.page(t, store.PageRequest{Limit: store.MaxPageSize})
			require.Equal(t, []store.LogicalMessageID{s.two, s.car, s.three}, pageIDs(all))
			requireLost(t, s, all.Unreadable)
			require.Less(t, all.Unreadable[0].Sequence, all.Messages[0].Sequence)
			require.Nil(t, all.NextAfterSequence)

			first := s.page(t, store.PageRequest{Limit: 1})
			require.Empty(t, first.Messages)
			requireLost(t, s, first.Unreadable)
			require.Equal(t, &first.Unreadable[0].Sequence, first.NextAfterSequence)
			second := s.page(t, store.PageRequest{After: first.NextAfterSequence, Limit: 1})
			require.Equal(t, []store.LogicalMessageID{s.two}, pageIDs(second))
			require.Empty(t, second.Unreadable)

			two := s.page(t, store.PageRequest{Limit: 2, Recipient: &bob})
			require.Equal(t, []store.LogicalMessageID{s.two}, pageIDs(two), "the unreadable one counts toward the limit")
			requireLost(t, s, two.Unreadable)
			require.Equal(t, &two.Messages[0].Sequence, two.NextAfterSequence)

			carols := s.page(t, store.PageRequest{Limit: 10, Recipient: &carol})
			require.Equal(t, []store.LogicalMessageID{s.car}, pageIDs(carols))
			require.Empty(t, carols.Unreadable)

			require.EqualValues(t, 4, s.a.count(nil))
			require.EqualValues(t, 3, s.a.count(&bob))
		})
	}
}

// TestRetrySkipsUnreadable: a retry skips the unreadable message, sends
// the rest in order, still stops at the first failed hand-off, and
// reports what it skipped in an *UnreadableError; once it is abandoned the
// retry reports nothing.
func TestRetrySkipsUnreadable(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			s := newUnreadableSetup(t, kind)

			// The first hand-off fails: nothing sent, both reported.
			s.net.FailNextSends(1)
			sent, err := s.a.c.RetryPendingMessages(s.ctx, bob)
			require.Empty(t, sent)
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.ErrorIs(t, err, transporttest.ErrInjected)
			require.ErrorIs(t, err, store.ErrUnreadable)
			require.ErrorIs(t, err, seal.ErrWrongKey)
			var ue *store.UnreadableError
			require.ErrorAs(t, err, &ue)
			requireLost(t, s, ue.Entries)
			require.Zero(t, s.net.Pending(bob))

			// Then the readable ones go, in order; the lost one is skipped.
			s.net.ResetCalls()
			sent, err = s.a.c.RetryPendingMessages(s.ctx, bob)
			require.Equal(t, []store.LogicalMessageID{s.two, s.three}, sent)
			require.ErrorIs(t, err, store.ErrUnreadable)
			require.NotErrorIs(t, err, client.ErrMessageNotSent)
			ue = nil
			require.ErrorAs(t, err, &ue)
			requireLost(t, s, ue.Entries)
			require.Equal(t, []string{transporttest.OpSend, transporttest.OpSend}, ops(s.net.Calls()), "no fetch, no hand-off for the skipped one")
			require.Equal(t, []string{"two", "three"}, messages(t, s.b.poll()))
			requireCleared(t, s.a.poll(), true)
			require.EqualValues(t, 2, s.a.count(nil), "the lost one and carol's are pending")

			// Abandoned by what the page reported: gone, and the retry is
			// clean; carol's message is untouched.
			p := s.page(t, store.PageRequest{Limit: 10})
			requireLost(t, s, p.Unreadable)
			require.Equal(t, client.Abandoned, s.a.abandon(p.Unreadable[0].Recipient, p.Unreadable[0].ID))
			require.Empty(t, s.a.retry(bob))
			require.Equal(t, []store.LogicalMessageID{s.car}, s.a.pendingIDs(nil))
			st, err := s.a.c.AbandonPendingMessage(s.ctx, p.Unreadable[0].PendingMessage)
			require.NoError(t, err)
			require.Equal(t, client.NotPending, st)
		})
	}
}

// TestAbandonUnreadableBySequence removes an unreadable message by the
// sequence its page entry gives, and nothing else.
func TestAbandonUnreadableBySequence(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			s := newUnreadableSetup(t, kind)
			p := s.page(t, store.PageRequest{Limit: 10})
			requireLost(t, s, p.Unreadable)
			st, err := s.a.c.AbandonPendingMessage(s.ctx, p.Unreadable[0].PendingMessage)
			require.NoError(t, err)
			require.Equal(t, client.Abandoned, st)
			require.Equal(t, []store.LogicalMessageID{s.two, s.car, s.three}, s.a.pendingIDs(nil))
			st, err = s.a.c.AbandonPendingMessage(s.ctx, p.Unreadable[0].PendingMessage)
			require.NoError(t, err)
			require.Equal(t, client.NotPending, st)
		})
	}
}

// TestAbandonUndecodableRowBySequence: a pending row whose stored
// recipient is malformed (a writer of the file stored it so) has no
// identity to abandon by: AbandonPendingMessage removes it by the
// sequence its page entry gives, and nothing else; given again, or with
// another sequence, it removes nothing.
func TestAbandonUndecodableRowBySequence(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   store.DeviceAddress
	}{
		{"empty user id", store.DeviceAddress{UserID: "", DeviceID: 1}},
		{"over-long user id", store.DeviceAddress{UserID: strings.Repeat("x", store.MaxUserIDLen+1), DeviceID: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			net, a := openAlice(t, sqliteKind)
			mustOpen(t, net, bob)
			kept := a.sendFailed(bob, "kept")
			bad := insertRawPending(t, a, nil, tc.to, []byte("garbage"))

			p, err := a.c.PendingMessages(ctx, store.PageRequest{Limit: 10})
			require.NoError(t, err)
			require.Len(t, p.Unreadable, 1)
			u := p.Unreadable[0].PendingMessage
			require.Equal(t, tc.to, u.Recipient)
			require.Equal(t, bad, u.ID)
			require.ErrorIs(t, p.Unreadable[0].Cause, store.ErrCorruptRow)

			other := u
			other.Sequence = u.Sequence - 1 // kept's
			st, err := a.c.AbandonPendingMessage(ctx, other)
			require.NoError(t, err)
			require.Equal(t, client.NotPending, st, "another sequence: nothing to fall back on")
			require.EqualValues(t, 2, a.count(nil))

			st, err = a.c.AbandonPendingMessage(ctx, u)
			require.NoError(t, err)
			require.Equal(t, client.Abandoned, st)
			require.Equal(t, []store.LogicalMessageID{kept}, a.pendingIDs(nil), "only that row removed")
			st, err = a.c.AbandonPendingMessage(ctx, u)
			require.NoError(t, err)
			require.Equal(t, client.NotPending, st)
		})
	}
}
