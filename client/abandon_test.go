package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// TestAbandonIsLocalOnly: alice holds every kind of state (sessions, an
// unanswered initiation, pins, processed and pending inbound, pending
// outbound to three recipients). Abandoning one message makes no network
// call, sends no frame, and leaves every table byte-identical except the
// one pending_outbound_message row.
func TestAbandonIsLocalOnly(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	c := mustOpen(t, net, carol)
	mustOpen(t, net, dave) // never answers: alice keeps an initiation
	converse(t, a, b)
	converse(t, c, a)
	seedPendingInbound(t, a, bob, "pending inbound from bob")
	m1 := a.send(bob, "b1")
	target := a.send(bob, "b2 (abandoned)")
	m3 := a.send(bob, "b3")
	mc := a.send(carol, "c1")
	md := a.send(dave, "d1")
	require.Equal(t, []string{"b1", "b2 (abandoned)", "b3"}, messages(t, b.poll())) // ACKs wait in alice's mailbox

	before := dumpTables(t, sqliteaccess.DB(a.sql))
	for _, table := range []string{"identity_pin", "session", "session_initiation", "pending_inbound_message",
		"processed_inbound_message", "pending_outbound_message", "local_identity", "storage_key", "sqlite_sequence"} {
		require.NotEmpty(t, before[table], "fixture: %s has rows", table)
	}
	mailboxes := map[store.DeviceAddress]int{}
	for _, addr := range []store.DeviceAddress{alice, bob, carol, dave} {
		mailboxes[addr] = net.Pending(addr)
	}
	var targetSeq int64
	for _, m := range a.all(100, nil) {
		if m.ID == target {
			targetSeq = m.Sequence
		}
	}

	net.ResetCalls()
	st, err := a.c.AbandonPendingMessage(ctx, store.PendingMessage{Recipient: bob, ID: target, Sequence: targetSeq})
	require.NoError(t, err)
	require.Equal(t, client.Abandoned, st)
	require.Empty(t, net.Calls(), "abandon makes no transport or directory call")
	for addr, n := range mailboxes {
		require.Equal(t, n, net.Pending(addr), "no frame to %s", addr)
	}

	after := dumpTables(t, sqliteaccess.DB(a.sql))
	require.ElementsMatch(t, mapKeys(before), mapKeys(after))
	for table, rows := range before {
		if table == "pending_outbound_message" {
			continue
		}
		require.Equal(t, rows, after[table], "table %s changed", table)
	}
	var removed []string
	for _, row := range before["pending_outbound_message"] {
		if !slices.Contains(after["pending_outbound_message"], row) {
			removed = append(removed, row)
		}
	}
	require.Len(t, removed, 1)
	require.True(t, strings.HasPrefix(removed[0], fmt.Sprintf("sequence=%d ", targetSeq)), removed[0])
	require.Contains(t, removed[0], fmt.Sprintf("logical_id=x'%x'", target[:]))
	require.Len(t, after["pending_outbound_message"], len(before["pending_outbound_message"])-1)

	// The envelope already handed off is still delivered and acknowledged:
	// its ACK clears nothing; the others clear theirs.
	res := a.poll()
	require.Equal(t, []client.ReceiveResult{
		&client.Acknowledgement{From: bob, ID: m1, Cleared: true},
		&client.Acknowledgement{From: bob, ID: target, Cleared: false},
		&client.Acknowledgement{From: bob, ID: m3, Cleared: true},
	}, res)
	require.Equal(t, []store.LogicalMessageID{mc, md}, a.pendingIDs(nil))
	converse(t, a, b)
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// seedPendingInbound puts a sealed pending inbound row into d's database,
// the inbound state abandon never touches, so that the abandon test can prove it is
// not touched.
func seedPendingInbound(t *testing.T, d *device, from store.DeviceAddress, text string) {
	t.Helper()
	id := store.NewLogicalMessageID()
	sealed, err := d.kr.Seal(seal.RecordPendingInbound, seal.MessageAD(from.UserID, from.DeviceID, id), []byte(text))
	require.NoError(t, err)
	_, err = db.New(sqliteaccess.DB(d.sql)).InsertPendingInbound(context.Background(), db.InsertPendingInboundParams{
		SenderUserID: from.UserID, SenderDeviceID: from.DeviceID, LogicalID: id[:], Sealed: sealed,
	})
	require.NoError(t, err)
}

// TestAbandonStatuses: abandon twice is Abandoned then NotPending; the id
// to another recipient, an unknown id, and an acknowledged message are
// NotPending and change nothing.
func TestAbandonStatuses(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a, b := openPair(t, kind)
			mustOpenKind(t, kind, net, carol)
			acked := a.send(bob, "acked")
			b.poll()
			a.poll()
			id := a.send(bob, "to bob")
			other := a.send(carol, "to carol")
			snapshot := a.all(100, nil)

			net.ResetCalls()
			require.Equal(t, client.NotPending, a.abandon(carol, id), "same id, other recipient")
			require.Equal(t, client.NotPending, a.abandon(bob, other), "same id, other recipient")
			require.Equal(t, client.NotPending, a.abandon(bob, store.NewLogicalMessageID()), "never sent")
			require.Equal(t, client.NotPending, a.abandon(bob, acked), "acknowledged")
			require.Equal(t, client.NotPending, a.abandon(store.DeviceAddress{UserID: "bob", DeviceID: 2}, id), "other device of the same user")
			require.Equal(t, snapshot, a.all(100, nil))

			require.Equal(t, client.Abandoned, a.abandon(bob, id))
			require.Equal(t, client.NotPending, a.abandon(bob, id))
			require.Equal(t, []store.LogicalMessageID{other}, a.pendingIDs(nil))
			require.Zero(t, a.count(&bob))
			require.EqualValues(t, 1, a.count(&carol))
			require.Empty(t, net.Calls())
			require.Equal(t, "ABANDONED", client.Abandoned.String())
			require.Equal(t, "NOT_PENDING", client.NotPending.String())
		})
	}
}

// TestAbandonFailedRemoval: when the removal fails (cancelled context,
// closed store, a store error) abandon returns the error and the message
// stays pending.
func TestAbandonFailedRemoval(t *testing.T) {
	t.Run("cancelled context", func(t *testing.T) {
		net := transporttest.NewNetwork()
		a := mustOpen(t, net, alice)
		mustOpen(t, net, bob)
		id := a.send(bob, "stays")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := a.c.AbandonPending(ctx, bob, id)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
	})
	t.Run("closed store", func(t *testing.T) {
		net := transporttest.NewNetwork()
		a := mustOpen(t, net, alice)
		mustOpen(t, net, bob)
		id := a.send(bob, "stays")
		require.NoError(t, a.st.Close())
		_, err := a.c.AbandonPending(context.Background(), bob, id)
		require.ErrorIs(t, err, store.ErrClosed)
		a.reopen()
		require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
		require.Equal(t, client.Abandoned, a.abandon(bob, id))
	})
	for _, kind := range bothStores {
		t.Run("store error/"+string(kind), func(t *testing.T) {
			ctx := context.Background()
			_, a, _ := openPair(t, kind)
			id := a.send(bob, "stays")
			fs := &failingStore{Store: a.st, fail: errStoreBroken}
			cfg := a.config()
			cfg.Store = fs
			a.restartWith(cfg)
			st, err := a.c.AbandonPending(ctx, bob, id)
			require.ErrorIs(t, err, errStoreBroken)
			require.NotEqual(t, client.Abandoned, st)
			require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
			fs.fail = nil
			st, err = a.c.AbandonPending(ctx, bob, id)
			require.NoError(t, err)
			require.Equal(t, client.Abandoned, st)
		})
	}
}

// abandonThenRetry abandons gone and checks that the retry to b then
// hands off kept alone, which b reads as keptText and acknowledges, so
// that a has nothing left pending.
func abandonThenRetry(t *testing.T, net *transporttest.Network, a, b *device, gone, kept store.LogicalMessageID, keptText string) {
	t.Helper()
	require.Equal(t, client.Abandoned, a.abandon(b.addr, gone))
	net.ResetCalls()
	require.Equal(t, []store.LogicalMessageID{kept}, a.retry(b.addr))
	require.Equal(t, 1, sendsTo(net.Calls(), b.addr))
	require.Equal(t, []string{keptText}, messages(t, b.poll()))
	a.poll()
	require.Zero(t, a.count(nil))
}

// TestAbandonAfterFailedHandOff: a message whose only hand-off failed (no
// envelope ever left) is abandoned; the retry sends nothing.
func TestAbandonAfterFailedHandOff(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a, b := openPair(t, kind)
			kept := a.sendFailed(bob, "kept")
			gone := a.sendFailed(bob, "gone")
			abandonThenRetry(t, net, a, b, gone, kept, "kept")
			converse(t, a, b)
		})
	}
}

// TestAbandonAfterFailedEncryption: a retry whose encryption failed leaves
// the message pending; it can be abandoned and is never sent.
func TestAbandonAfterFailedEncryption(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			gone := a.sendFailed(bob, "gone")
			kept := a.sendFailed(bob, "kept")

			a.failEncryptions(1)
			net.ResetCalls()
			sent, err := a.c.RetryPendingMessages(ctx, bob)
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.ErrorIs(t, err, errEncryptRefused)
			require.Empty(t, sent)
			require.Zero(t, sendsTo(net.Calls(), bob), "nothing handed off")
			require.Equal(t, []store.LogicalMessageID{gone, kept}, a.pendingIDs(nil))

			abandonThenRetry(t, net, a, b, gone, kept, "kept")

			// A failed encryption in Send itself: ErrMessageNotSent, pending.
			a.failEncryptions(1)
			id, err := a.c.Send(ctx, bob, []byte("enc fails"))
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.ErrorIs(t, err, errEncryptRefused)
			require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
			require.Equal(t, client.Abandoned, a.abandon(bob, id))
			converse(t, a, b)
		})
	}
}
