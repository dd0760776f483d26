package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store"
)

// pinned is one pin a walk gave.
type pinned struct {
	Peer store.DeviceAddress
	Pin  string
	Err  bool
}

// pins walks every pin of h's store.
func (h *harness) pins(t *testing.T) []pinned {
	t.Helper()
	var got []pinned
	require.NoError(t, h.s.Pins(h.ctx, func(peer store.DeviceAddress, pin []byte, err error) error {
		got = append(got, pinned{Peer: peer, Pin: string(pin), Err: err != nil})
		return nil
	}))
	return got
}

// Pins walks every pin in address order, across batches, and only pins:
// a device with a session and no pin is not given.
func testPins(t *testing.T, h *harness) {
	require.Empty(t, h.pins(t))
	var want []pinned
	// More than a batch of the SQLite store's walk, in an order that is not
	// the order written.
	const n = 600
	for i := n - 1; i >= 0; i-- {
		peer := store.DeviceAddress{UserID: fmt.Sprintf("user-%04d", i), DeviceID: int64(i % 3)}
		require.NoError(t, h.s.SavePeer(h.ctx, peer, store.PeerState{Pin: []byte("pin " + peer.String()), Session: []byte("s")}))
	}
	for i := range n {
		peer := store.DeviceAddress{UserID: fmt.Sprintf("user-%04d", i), DeviceID: int64(i % 3)}
		want = append(want, pinned{Peer: peer, Pin: "pin " + peer.String()})
	}
	require.NoError(t, h.s.SavePeer(h.ctx, store.DeviceAddress{UserID: "no-pin", DeviceID: 1}, store.PeerState{Session: []byte("s")}))
	require.Equal(t, want, h.pins(t))

	stop := errors.New("stop")
	calls := 0
	err := h.s.Pins(h.ctx, func(store.DeviceAddress, []byte, error) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, calls, "fn's error ends the walk")

	h.s.Close()
	require.ErrorIs(t, h.s.Pins(h.ctx, func(store.DeviceAddress, []byte, error) error { return nil }), store.ErrClosed)
}

// A pin that does not open is given with its error, between the others,
// and does not stop the walk.
func testPinsUnreadable(t *testing.T, h *harness) {
	for _, p := range []store.DeviceAddress{alice, aliceTwo, bob} {
		require.NoError(t, h.s.SavePeer(h.ctx, p, store.PeerState{Pin: []byte("pin " + p.String())}))
	}
	h.tamper.SetPeerSealed(t, h.s, aliceTwo, store.PeerPin, []byte("not a sealed value"))
	got := h.pins(t)
	require.Equal(t, []pinned{
		{Peer: alice, Pin: "pin " + alice.String()},
		{Peer: aliceTwo, Err: true},
		{Peer: bob, Pin: "pin " + bob.String()},
	}, got)
}

// ForgetPeer removes the device's session, initiation, pin, pending
// inbound messages and processed ids, in one transaction, and nothing of
// any other device nor its pending outbound messages.
func testForgetPeer(t *testing.T, h *harness) {
	out := h.seed(4, alice, bob)
	for i, p := range []store.DeviceAddress{alice, aliceTwo, bob} {
		require.NoError(t, h.s.SavePeer(h.ctx, p, store.PeerState{Session: []byte("s"), Initiation: []byte("i"), Pin: []byte("pin")}))
		for j := range 3 {
			_, err := h.s.CommitReceived(h.ctx, p, ID(900+10*i+j), []byte("m"), store.Inbound{})
			require.NoError(t, err)
		}
	}
	// Two of alice's messages are finalized: their ids stay processed.
	page, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: 2, Sender: &alice})
	require.NoError(t, err)
	for _, m := range page.Messages {
		_, ok, err := h.s.RemovePendingInbound(h.ctx, m.Sequence)
		require.NoError(t, err)
		require.True(t, ok)
	}
	othersInbound := func() store.InboundPage {
		t.Helper()
		all, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
		require.NoError(t, err)
		var kept store.InboundPage
		for _, m := range all.Messages {
			if m.Sender != alice {
				kept.Messages = append(kept.Messages, m)
			}
		}
		return kept
	}
	inboundBefore := othersInbound()
	pendingBefore := h.all(nil)
	bobBefore, err := h.s.Peer(h.ctx, bob)
	require.NoError(t, err)
	countBefore, err := h.s.PendingInboundCount(h.ctx, nil)
	require.NoError(t, err)

	f, err := h.s.ForgetPeer(h.ctx, alice)
	require.NoError(t, err)
	require.Equal(t, store.ForgottenPeer{Session: true, Initiation: true, Pin: true, Inbound: 1, Processed: 3}, f)

	st, err := h.s.Peer(h.ctx, alice)
	require.NoError(t, err)
	require.Equal(t, store.PeerState{}, st)
	n, err := h.s.PendingInboundCount(h.ctx, &alice)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = h.s.PendingInboundCount(h.ctx, nil)
	require.NoError(t, err)
	require.Equal(t, countBefore-1, n, "the count follows the removal")
	// Its ids are no longer processed: a message with one is new again.
	got, err := h.s.CommitReceived(h.ctx, alice, ID(900), []byte("again"), store.Inbound{})
	require.NoError(t, err)
	require.Equal(t, store.ReceivedNew, got.Status)

	// Nothing else changed: the other devices (aliceTwo shares the user
	// id), their inbound messages and processed ids, every pending
	// outbound message, alice's included.
	require.Equal(t, pendingBefore, h.all(nil))
	require.Equal(t, pendings(out...), h.all(nil))
	require.Equal(t, inboundBefore, othersInbound())
	bobAfter, err := h.s.Peer(h.ctx, bob)
	require.NoError(t, err)
	require.Equal(t, bobBefore, bobAfter)
	st, err = h.s.Peer(h.ctx, aliceTwo)
	require.NoError(t, err)
	require.Equal(t, store.PeerState{Session: []byte("s"), Initiation: []byte("i"), Pin: []byte("pin")}, st)
	got, err = h.s.CommitReceived(h.ctx, aliceTwo, ID(910), []byte("copy"), store.Inbound{})
	require.NoError(t, err)
	require.Equal(t, store.ReceivedPending, got.Status, "aliceTwo's message is still pending")

	// A device with nothing stored: nothing removed, no error.
	f, err = h.s.ForgetPeer(h.ctx, store.DeviceAddress{UserID: "nobody", DeviceID: 1})
	require.NoError(t, err)
	require.Zero(t, f)

	_, err = h.s.ForgetPeer(h.ctx, store.DeviceAddress{UserID: "", DeviceID: 1})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}
