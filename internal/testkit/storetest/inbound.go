package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// inboundTests are the contract tests of the pending inbound queue.
var inboundTests = []struct {
	name string
	fn   func(t *testing.T, h *harness)
}{
	{"InboundPages", testInboundPages},
	{"InboundCount", testInboundCount},
	{"InboundRemove", testInboundRemove},
	{"InboundSequencesNeverReused", testInboundSequencesNeverReused},
	{"InboundInvalidArgument", testInboundInvalidArgument},
	{"InboundUnreadable", testInboundUnreadable},
	{"InboundWalk", testInboundWalk},
	{"InboundLeavesOutboundAlone", testInboundLeavesOutboundAlone},
	{"InboundConcurrentRemove", testInboundConcurrentRemove},
	{"InboundClosed", testInboundClosed},
}

// carol sends nothing in the inbound tests' seeds.
var carol = store.DeviceAddress{UserID: "carol", DeviceID: 3}

// receive commits message n from from as received and returns it.
func (h *harness) receive(from store.DeviceAddress, n int) store.InboundMessage {
	h.t.Helper()
	m := store.InboundMessage{Sender: from, ID: ID(10_000 + n), Plaintext: []byte(fmt.Sprintf("from %s, message %d", from, n))}
	got, err := h.s.CommitReceived(h.ctx, from, m.ID, m.Plaintext, store.Inbound{Update: store.PeerState{Session: []byte(fmt.Sprintf("session %d", n))}})
	require.NoError(h.t, err)
	require.Equal(h.t, store.ReceivedNew, got.Status)
	m.Sequence = got.Sequence
	return m
}

// receiveMany receives messages 1..n round-robin from senders.
func (h *harness) receiveMany(n int, from ...store.DeviceAddress) []store.InboundMessage {
	h.t.Helper()
	out := make([]store.InboundMessage, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, h.receive(from[(i-1)%len(from)], i))
	}
	return out
}

// inboundAll pages every pending inbound message (from sender only, if
// not nil) with pages of limit, and fails on an unreadable row.
func (h *harness) inboundAll(limit int, sender *store.DeviceAddress) []store.InboundMessage {
	h.t.Helper()
	var out []store.InboundMessage
	req := store.InboundPageRequest{Limit: limit, Sender: sender}
	for i := 0; ; i++ {
		require.Less(h.t, i, 10_000, "enumeration does not end")
		p, err := h.s.PendingInbound(h.ctx, req)
		require.NoError(h.t, err)
		require.Empty(h.t, p.Unreadable)
		require.LessOrEqual(h.t, len(p.Messages), limit)
		out = append(out, p.Messages...)
		if p.NextAfterSequence == nil {
			return out
		}
		require.Equal(h.t, out[len(out)-1].Sequence, *p.NextAfterSequence)
		req.After = p.NextAfterSequence
	}
}

func inboundFrom(ms []store.InboundMessage, from store.DeviceAddress) []store.InboundMessage {
	var out []store.InboundMessage
	for _, m := range ms {
		if m.Sender == from {
			out = append(out, m)
		}
	}
	return out
}

func testInboundPages(t *testing.T, h *harness) {
	ms := h.receiveMany(23, alice, bob, aliceTwo)
	for i := 1; i < len(ms); i++ {
		require.Greater(t, ms[i].Sequence, ms[i-1].Sequence, "sequences strictly increase")
	}
	for _, limit := range []int{1, 7, 23, store.MaxPageSize} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			require.Equal(t, ms, h.inboundAll(limit, nil))
			for _, from := range []store.DeviceAddress{alice, bob, aliceTwo, carol} {
				require.Equal(t, inboundFrom(ms, from), h.inboundAll(limit, &from), "from %s", from)
			}
		})
	}
	t.Run("from a cursor", func(t *testing.T) {
		after := ms[10].Sequence
		p, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{After: &after, Limit: 5})
		require.NoError(t, err)
		require.Equal(t, ms[11:16], p.Messages)
		require.Equal(t, ms[15].Sequence, *p.NextAfterSequence)
	})
	t.Run("exact last page", func(t *testing.T) {
		after := ms[17].Sequence
		p, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{After: &after, Limit: 5})
		require.NoError(t, err)
		require.Equal(t, ms[18:], p.Messages)
		require.Nil(t, p.NextAfterSequence, "the limit + 1 probe finds nothing")
	})
	t.Run("opens only the page", func(t *testing.T) {
		n := h.opens(func() {
			_, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: 5})
			require.NoError(t, err)
		})
		require.Equal(t, int64(5), n, "the probe row is not opened")
	})
}

func testInboundCount(t *testing.T, h *harness) {
	ms := h.receiveMany(9, alice, bob, bob)
	for _, tc := range []struct {
		sender *store.DeviceAddress
		want   int64
	}{
		{nil, 9}, {&alice, 3}, {&bob, 6}, {&carol, 0},
	} {
		var n int64
		opened := h.opens(func() {
			var err error
			n, err = h.s.PendingInboundCount(h.ctx, tc.sender)
			require.NoError(t, err)
		})
		require.Equal(t, tc.want, n, "sender %v", tc.sender)
		require.Zero(t, opened, "a count opens no record")
	}
	_, ok, err := h.s.RemovePendingInbound(h.ctx, ms[1].Sequence)
	require.NoError(t, err)
	require.True(t, ok)
	n, err := h.s.PendingInboundCount(h.ctx, &bob)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
}

func testInboundRemove(t *testing.T, h *harness) {
	ms := h.receiveMany(5, alice, bob)
	peerBefore, err := h.s.Peer(h.ctx, bob)
	require.NoError(t, err)
	var removed store.RemovedInbound
	opened := h.opens(func() {
		var ok bool
		removed, ok, err = h.s.RemovePendingInbound(h.ctx, ms[1].Sequence)
		require.NoError(t, err)
		require.True(t, ok)
	})
	require.Zero(t, opened, "removal opens nothing")
	require.Equal(t, store.RemovedInbound{Sender: bob, ID: ms[1].ID, Decoded: true}, removed)
	want := []store.InboundMessage{ms[0], ms[2], ms[3], ms[4]}
	require.Equal(t, want, h.inboundAll(store.MaxPageSize, nil), "the others are untouched")

	_, ok, err := h.s.RemovePendingInbound(h.ctx, ms[1].Sequence)
	require.NoError(t, err)
	require.False(t, ok, "removing again removes nothing")
	for _, seq := range []int64{0, -1, ms[4].Sequence + 1} {
		_, ok, err := h.s.RemovePendingInbound(h.ctx, seq)
		require.NoError(t, err)
		require.False(t, ok, "sequence %d", seq)
	}
	require.Equal(t, want, h.inboundAll(store.MaxPageSize, nil))
	peerAfter, err := h.s.Peer(h.ctx, bob)
	require.NoError(t, err)
	require.Equal(t, peerBefore, peerAfter, "the sender's state is untouched")

	// The processed id stays: a copy arriving later is a duplicate.
	got, err := h.s.CommitReceived(h.ctx, bob, ms[1].ID, ms[1].Plaintext, store.Inbound{Update: store.PeerState{Session: []byte("s")}})
	require.NoError(t, err)
	require.Equal(t, store.Received{Status: store.ReceivedBefore}, got)
	require.Equal(t, want, h.inboundAll(store.MaxPageSize, nil))
}

func testInboundSequencesNeverReused(t *testing.T, h *harness) {
	ms := h.receiveMany(3, alice)
	for _, m := range ms {
		_, ok, err := h.s.RemovePendingInbound(h.ctx, m.Sequence)
		require.NoError(t, err)
		require.True(t, ok)
	}
	next := h.receive(alice, 4)
	require.Greater(t, next.Sequence, ms[2].Sequence, "a removed sequence is never handed out again")
}

func testInboundInvalidArgument(t *testing.T, h *harness) {
	ms := h.receiveMany(3, alice)
	bad := store.DeviceAddress{UserID: "", DeviceID: 1}
	neg := int64(-1)
	for _, tc := range []struct {
		name string
		fn   func() error
	}{
		{"limit 0", func() error { _, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: 0}); return err }},
		{"limit over", func() error {
			_, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: store.MaxPageSize + 1})
			return err
		}},
		{"malformed sender", func() error {
			_, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: 1, Sender: &bad})
			return err
		}},
		{"negative cursor", func() error {
			_, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: 1, After: &neg})
			return err
		}},
		{"count malformed sender", func() error { _, err := h.s.PendingInboundCount(h.ctx, &bad); return err }},
		{"receive malformed sender", func() error {
			_, err := h.s.CommitReceived(h.ctx, bad, ID(1), []byte("x"), store.Inbound{Update: store.PeerState{Session: []byte("s")}})
			return err
		}},
		{"receive oversized", func() error {
			_, err := h.s.CommitReceived(h.ctx, carol, ID(1), make([]byte, store.MaxPlaintextSize+1), store.Inbound{Update: store.PeerState{Session: []byte("s")}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.fn(), store.ErrInvalidArgument)
			require.Equal(t, ms, h.inboundAll(store.MaxPageSize, nil), "nothing changed")
			p, err := h.s.Peer(h.ctx, carol)
			require.NoError(t, err)
			require.Equal(t, store.PeerState{}, p, "no session stored for a refused message")
		})
	}
	// The oversized message was not recorded as processed.
	got, err := h.s.CommitReceived(h.ctx, carol, ID(1), []byte("x"), store.Inbound{Update: store.PeerState{Session: []byte("s")}})
	require.NoError(t, err)
	require.Equal(t, store.ReceivedNew, got.Status)
}

func testInboundUnreadable(t *testing.T, h *harness) {
	ms := h.receiveMany(6, alice, bob)
	// A value sealed with a key the keyring does not hold, and one moved
	// from another row.
	other := NewKeyring(t)
	foreign, err := other.Seal(seal.RecordPendingInbound, seal.MessageAD(alice.UserID, alice.DeviceID, ms[2].ID), []byte("x"))
	require.NoError(t, err)
	h.tamper.SetInboundSealed(t, h.s, ms[2].Sequence, foreign)
	moved, err := h.keys.Seal(seal.RecordPendingInbound, seal.MessageAD(alice.UserID, alice.DeviceID, ms[0].ID), []byte("moved"))
	require.NoError(t, err)
	h.tamper.SetInboundSealed(t, h.s, ms[3].Sequence, moved)

	p, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
	require.NoError(t, err)
	require.Equal(t, []store.InboundMessage{ms[0], ms[1], ms[4], ms[5]}, p.Messages, "one damaged row hides no other")
	require.Len(t, p.Unreadable, 2)
	require.ErrorIs(t, p.Unreadable[0].Cause, seal.ErrWrongKey)
	require.Equal(t, store.InboundMessage{Sequence: ms[2].Sequence, Sender: alice, ID: ms[2].ID}, p.Unreadable[0].InboundMessage)
	require.ErrorIs(t, p.Unreadable[1].Cause, seal.ErrAuthentication)
	require.Equal(t, store.InboundMessage{Sequence: ms[3].Sequence, Sender: bob, ID: ms[3].ID}, p.Unreadable[1].InboundMessage)
	n, err := h.s.PendingInboundCount(h.ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(6), n, "unreadable rows are counted")

	// Each is removed by its sequence.
	for _, u := range p.Unreadable {
		removed, ok, err := h.s.RemovePendingInbound(h.ctx, u.Sequence)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, store.RemovedInbound{Sender: u.Sender, ID: u.ID, Decoded: true}, removed)
	}
	require.Equal(t, []store.InboundMessage{ms[0], ms[1], ms[4], ms[5]}, h.inboundAll(store.MaxPageSize, nil))
}

func testInboundWalk(t *testing.T, h *harness) {
	ms := h.receiveMany(2*store.MaxPageSize+3, alice, bob)
	h.tamper.SetInboundSealed(t, h.s, ms[150].Sequence, []byte("garbage"))
	var got []store.InboundMessage
	var bad []int64
	for m, err := range storeimpl.WalkPendingInbound(h.ctx, h.s, store.InboundPageRequest{Limit: store.MaxPageSize}) {
		var ue *store.UnreadableInboundError
		if errors.As(err, &ue) {
			require.ErrorIs(t, err, store.ErrUnreadable)
			bad = append(bad, ue.Entry.Sequence)
			// Discarding what the walk yields never ends it.
			_, ok, err := h.s.RemovePendingInbound(h.ctx, ue.Entry.Sequence)
			require.NoError(t, err)
			require.True(t, ok)
			continue
		}
		require.NoError(t, err)
		got = append(got, m)
		_, ok, err := h.s.RemovePendingInbound(h.ctx, m.Sequence)
		require.NoError(t, err)
		require.True(t, ok)
	}
	want := append(append([]store.InboundMessage(nil), ms[:150]...), ms[151:]...)
	require.Equal(t, want, got)
	require.Equal(t, []int64{ms[150].Sequence}, bad)
	n, err := h.s.PendingInboundCount(h.ctx, nil)
	require.NoError(t, err)
	require.Zero(t, n)
}

func testInboundLeavesOutboundAlone(t *testing.T, h *harness) {
	out := h.seed(4, alice, bob)
	in := h.receiveMany(4, alice, bob)
	// The same logical id in both directions is unrelated.
	_, err := h.s.CommitReceived(h.ctx, alice, out[0].id, []byte("same id"), store.Inbound{Update: store.PeerState{Session: []byte("s")}})
	require.NoError(t, err)
	for _, m := range in {
		_, ok, err := h.s.RemovePendingInbound(h.ctx, m.Sequence)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Equal(t, pendings(out...), h.all(nil), "pending outbound is untouched")
	n, err := h.s.PendingInboundCount(h.ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	// An ACK removes no inbound message.
	_, err = h.s.CommitAck(h.ctx, alice, out[0].id, store.Inbound{Update: store.PeerState{Session: []byte("s")}})
	require.NoError(t, err)
	n, err = h.s.PendingInboundCount(h.ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

func testInboundConcurrentRemove(t *testing.T, h *harness) {
	ms := h.receiveMany(20, alice, bob)
	var wg sync.WaitGroup
	var mu sync.Mutex
	removed := map[int64]int{}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range ms {
				_, ok, err := h.s.RemovePendingInbound(h.ctx, m.Sequence)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					removed[m.Sequence]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, removed, len(ms))
	for seq, n := range removed {
		require.Equal(t, 1, n, "sequence %d removed once", seq)
	}
}

func testInboundClosed(t *testing.T, h *harness) {
	ms := h.receiveMany(1, alice)
	require.NoError(t, h.s.Close())
	for _, tc := range []struct {
		name string
		fn   func() error
	}{
		{"page", func() error { _, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: 1}); return err }},
		{"count", func() error { _, err := h.s.PendingInboundCount(h.ctx, nil); return err }},
		{"remove", func() error { _, _, err := h.s.RemovePendingInbound(h.ctx, ms[0].Sequence); return err }},
	} {
		require.ErrorIs(t, tc.fn(), store.ErrClosed, tc.name)
	}
}
