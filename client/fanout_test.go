package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

// bob's other devices, for fan-out sends.
var (
	bob2 = store.DeviceAddress{UserID: "bob", DeviceID: 2}
	bob3 = store.DeviceAddress{UserID: "bob", DeviceID: 3}
	bobs = []store.DeviceAddress{bob, bob2, bob3}
)

func (d *device) fanout(to []store.DeviceAddress, id store.LogicalMessageID, text string) []client.DeviceOutcome {
	d.tb.Helper()
	outs, err := d.c.SendToDevices(context.Background(), to, id, []byte(text))
	require.NoError(d.tb, err)
	return outs
}

// snapshot is everything d stores: every table for SQLite; for memstore
// the pending messages, the local identity and the state of peers.
func (d *device) snapshot(peers ...store.DeviceAddress) any {
	d.tb.Helper()
	if d.sql != nil {
		return dumpTables(d.tb, sqliteaccess.DB(d.sql))
	}
	ctx := context.Background()
	li, err := d.st.LocalIdentity(ctx)
	require.NoError(d.tb, err)
	states := map[store.DeviceAddress]store.PeerState{}
	for _, p := range peers {
		states[p], err = d.st.Peer(ctx, p)
		require.NoError(d.tb, err)
	}
	return struct {
		pending []store.PendingMessage
		local   store.LocalIdentity
		peers   map[store.DeviceAddress]store.PeerState
	}{d.all(store.MaxPageSize, nil), li, states}
}

// pendingTo returns the recipients of the pending messages with id, in
// sequence order.
func (d *device) pendingTo(id store.LogicalMessageID) []store.DeviceAddress {
	d.tb.Helper()
	var out []store.DeviceAddress
	for _, m := range d.all(store.MaxPageSize, nil) {
		if m.ID == id {
			out = append(out, m.Recipient)
		}
	}
	return out
}

// openBobs opens bob's three devices on net.
func openBobs(t *testing.T, kind storeKind, net *transporttest.Network) (b1, b2, b3 *device) {
	t.Helper()
	return mustOpenKind(t, kind, net, bob), mustOpenKind(t, kind, net, bob2), mustOpenKind(t, kind, net, bob3)
}

// TestSendToDevicesPendingUntilEachACK: one logical message to bob's three
// devices (a session with one, bundles fetched for the others) is one
// pending row per device, each removed only by that device's own ACK; the
// device that never acknowledged gets it again from a retry.
func TestSendToDevicesPendingUntilEachACK(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a := openAlice(t, kind)
			b1, b2, b3 := openBobs(t, kind, net)
			mustOpenKind(t, kind, net, carol)
			converse(t, a, b1)
			other := a.send(carol, "to carol")

			net.ResetCalls()
			id := store.NewLogicalMessageID()
			outs := a.fanout(bobs, id, "to all of bob's devices")
			require.Equal(t, []client.DeviceOutcome{{To: bob}, {To: bob2}, {To: bob3}}, outs)
			require.Equal(t, []string{transporttest.OpFetch, transporttest.OpFetch, transporttest.OpSend, transporttest.OpSend, transporttest.OpSend}, ops(net.Calls()),
				"bundles fetched only where there is no session, and before any hand-off")
			all := a.all(store.MaxPageSize, nil)
			require.Len(t, all, 4)
			require.Equal(t, other, all[0].ID)
			for i, m := range all[1:] {
				require.Equal(t, store.PendingMessage{Recipient: bobs[i], ID: id, Sequence: m.Sequence, Plaintext: []byte("to all of bob's devices")}, m)
			}

			// bob/2 acknowledges first: only its row goes.
			require.Equal(t, []string{"to all of bob's devices"}, messages(t, b2.poll()))
			require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: bob2, ID: id, Cleared: true}}, a.poll())
			require.Equal(t, []store.DeviceAddress{bob, bob3}, a.pendingTo(id))
			require.Equal(t, []string{"to all of bob's devices"}, messages(t, b1.poll()))
			require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: bob, ID: id, Cleared: true}}, a.poll())
			require.Equal(t, []store.DeviceAddress{bob3}, a.pendingTo(id))

			// bob/3 has not acknowledged: a retry sends it again.
			net.ResetCalls()
			require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob3))
			require.Equal(t, []string{transporttest.OpSend}, ops(net.Calls()))
			res := b3.poll()
			require.Len(t, res, 2)
			m := res[0].(*client.Message)
			require.Equal(t, &client.Message{From: alice, ID: id, Sequence: m.Sequence, Plaintext: []byte("to all of bob's devices"), FirstContact: true}, m)
			require.Equal(t, &client.Message{From: alice, ID: id, Sequence: m.Sequence, Plaintext: []byte("to all of bob's devices"), Again: true, FirstContact: true}, res[1])
			require.Equal(t, []client.ReceiveResult{
				&client.Acknowledgement{From: bob3, ID: id, Cleared: true},
			}, a.poll())
			require.Empty(t, a.pendingTo(id))
			require.Equal(t, []store.LogicalMessageID{other}, a.pendingIDs(nil), "carol's message untouched")
			for _, b := range []*device{b1, b2, b3} {
				converse(t, a, b)
			}
		})
	}
}

// TestSendToDevicesAbandonPerDevice: abandoning (bob/2, id) removes that
// one row and nothing else (SQLite: every other table and row identical);
// the other devices' rows of the same id stay pending.
func TestSendToDevicesAbandonPerDevice(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a := openAlice(t, kind)
			_, b2, _ := openBobs(t, kind, net)
			id := store.NewLogicalMessageID()
			a.fanout(bobs, id, "fan-out")
			before := a.all(store.MaxPageSize, nil)
			var tables map[string][]string
			if a.sql != nil {
				tables = dumpTables(t, sqliteaccess.DB(a.sql))
			}

			net.ResetCalls()
			require.Equal(t, client.Abandoned, a.abandon(bob2, id))
			require.Empty(t, net.Calls(), "abandon is local only")
			require.Equal(t, []store.PendingMessage{before[0], before[2]}, a.all(store.MaxPageSize, nil))
			if a.sql != nil {
				after := dumpTables(t, sqliteaccess.DB(a.sql))
				for table, rows := range tables {
					if table != "pending_outbound_message" {
						require.Equal(t, rows, after[table], "table %s changed", table)
					}
				}
				require.Len(t, after["pending_outbound_message"], 2)
				require.Subset(t, tables["pending_outbound_message"], after["pending_outbound_message"])
			}
			require.Equal(t, client.NotPending, a.abandon(bob2, id))

			// Not a recall: bob/2 still gets it; its ACK clears nothing else.
			require.Equal(t, []string{"fan-out"}, messages(t, b2.poll()))
			require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: bob2, ID: id, Cleared: false}}, a.poll())
			require.Equal(t, []store.DeviceAddress{bob, bob3}, a.pendingTo(id))
		})
	}
}

// failingTo wraps a transport and fails every send to the devices in
// fail (while they are in it) with transporttest.ErrInjected.
type failingTo struct {
	transport.Transport
	mu   sync.Mutex
	fail map[store.DeviceAddress]bool
}

func (f *failingTo) set(addr store.DeviceAddress, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[store.DeviceAddress]bool{}
	}
	f.fail[addr] = fail
}

func (f *failingTo) Send(ctx context.Context, to store.DeviceAddress, env []byte) error {
	f.mu.Lock()
	fail := f.fail[to]
	f.mu.Unlock()
	if fail {
		return fmt.Errorf("send to %s: %w", to, transporttest.ErrInjected)
	}
	return f.Transport.Send(ctx, to, env)
}

// TestSendToDevicesPartialFailure: a failed hand-off to the middle device,
// then a failed encryption for the first one, are reported for that
// device alone (ErrMessageNotSent); its row stays pending, the others are
// delivered, and a retry delivers the missing one.
func TestSendToDevicesPartialFailure(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net := transporttest.NewNetwork()
			f := &failingTo{Transport: net}
			a := mustOpenVia(t, kind, net, f, alice)
			b1, b2, b3 := openBobs(t, kind, net)

			f.set(bob2, true)
			id := store.NewLogicalMessageID()
			outs, err := a.c.SendToDevices(ctx, bobs, id, []byte("hand-off fails for bob/2"))
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.ErrorIs(t, err, transporttest.ErrInjected)
			require.Len(t, outs, 3)
			require.Equal(t, client.DeviceOutcome{To: bob}, outs[0])
			require.Equal(t, client.DeviceOutcome{To: bob3}, outs[2])
			require.Equal(t, bob2, outs[1].To)
			require.ErrorIs(t, outs[1].Err, client.ErrMessageNotSent)
			require.ErrorIs(t, outs[1].Err, transporttest.ErrInjected)
			require.Equal(t, bobs, a.pendingTo(id))
			a.requireInitiation(bob2, true) // the session that encrypted it is stored
			require.Equal(t, []string{"hand-off fails for bob/2"}, messages(t, b1.poll()))
			require.Equal(t, []string{"hand-off fails for bob/2"}, messages(t, b3.poll()))
			require.Empty(t, b2.poll())
			a.poll()
			require.Equal(t, []store.DeviceAddress{bob2}, a.pendingTo(id))
			f.set(bob2, false)
			require.Equal(t, []store.LogicalMessageID{id}, a.retry(bob2))
			require.Equal(t, []string{"hand-off fails for bob/2"}, messages(t, b2.poll()))
			a.poll()
			require.Zero(t, a.count(nil))

			// Encryption fails for bob/1: stored pending without a session
			// change, not handed off; the others go.
			sessionBefore, err := a.st.Peer(ctx, bob)
			require.NoError(t, err)
			a.failEncryptions(1)
			net.ResetCalls()
			id2 := store.NewLogicalMessageID()
			outs, err = a.c.SendToDevices(ctx, bobs, id2, []byte("encryption fails for bob/1"))
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.Len(t, outs, 3)
			require.ErrorIs(t, outs[0].Err, client.ErrMessageNotSent)
			require.ErrorIs(t, outs[0].Err, errEncryptRefused)
			require.Equal(t, bobs, a.askedToEncrypt(), "the policy is asked once per device, in order")
			require.NotErrorIs(t, outs[0].Err, transporttest.ErrInjected)
			require.Equal(t, []client.DeviceOutcome{{To: bob2}, {To: bob3}}, outs[1:])
			require.Zero(t, sendsTo(net.Calls(), bob))
			require.Equal(t, bobs, a.pendingTo(id2))
			sessionAfter, err := a.st.Peer(ctx, bob)
			require.NoError(t, err)
			require.Equal(t, sessionBefore, sessionAfter, "no session change for the device that was not encrypted for")
			require.Empty(t, b1.poll())
			require.Equal(t, []store.LogicalMessageID{id2}, a.retry(bob))
			for _, b := range []*device{b1, b2, b3} {
				require.Equal(t, []string{"encryption fails for bob/1"}, messages(t, b.poll()))
			}
			a.poll()
			require.Zero(t, a.count(nil))
		})
	}
}

// TestSendToDevicesDuplicateRollsBackAll: an id already pending for one of
// the devices with another plaintext refuses the whole send
// (ErrLogicalIDReused): no row, session or pin is stored for any device,
// nothing is handed off, and the next send works on the sessions as
// stored.
func TestSendToDevicesDuplicateRollsBackAll(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a := openAlice(t, kind)
			b1, b2, b3 := openBobs(t, kind, net)
			converse(t, a, b1)
			id := store.NewLogicalMessageID()
			a.fanout([]store.DeviceAddress{bob2}, id, "first")
			before := a.snapshot(bobs...)

			net.ResetCalls()
			outs, err := a.c.SendToDevices(ctx, []store.DeviceAddress{bob, bob3, bob2}, id, []byte("again"))
			require.ErrorIs(t, err, client.ErrLogicalIDReused)
			require.Nil(t, outs)
			for _, b := range bobs {
				require.Zero(t, sendsTo(net.Calls(), b), "nothing handed off to %s", b)
			}
			require.Equal(t, before, a.snapshot(bobs...), "nothing stored for any device")

			id2 := store.NewLogicalMessageID()
			require.Equal(t, []client.DeviceOutcome{{To: bob}, {To: bob3}, {To: bob2}}, a.fanout([]store.DeviceAddress{bob, bob3, bob2}, id2, "next"))
			require.Equal(t, []string{"next"}, messages(t, b1.poll()))
			require.Equal(t, []string{"next"}, messages(t, b3.poll()))
			require.Equal(t, []string{"first", "next"}, messages(t, b2.poll()))
			a.poll()
			require.Zero(t, a.count(nil))
		})
	}
}

// TestSendToDevicesInvalidInput: malformed input is refused before
// anything is encrypted, stored or sent.
func TestSendToDevicesInvalidInput(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a := openAlice(t, kind)
			b1, _, _ := openBobs(t, kind, net)
			converse(t, a, b1)
			a.send(bob2, "pending")
			before := a.snapshot(bobs...)
			fresh := store.NewLogicalMessageID()
			for _, tc := range []struct {
				name string
				to   []store.DeviceAddress
				id   store.LogicalMessageID
				size int
			}{
				{"nil recipients", nil, fresh, 10},
				{"no recipient", []store.DeviceAddress{}, fresh, 10},
				{"empty user id", []store.DeviceAddress{bob, {DeviceID: 1}}, fresh, 10},
				{"negative device id", []store.DeviceAddress{bob, {UserID: "bob", DeviceID: -1}}, fresh, 10},
				{"self", []store.DeviceAddress{bob, alice}, fresh, 10},
				{"device listed twice", []store.DeviceAddress{bob, bob3, bob}, fresh, 10},
				{"plaintext too large", bobs, fresh, session.MaxPlaintextSize},
				// An id left unset: the recipients would drop the next
				// message sent under it as a duplicate.
				{"zero id", bobs, store.LogicalMessageID{}, 10},
			} {
				t.Run(tc.name, func(t *testing.T) {
					net.ResetCalls()
					outs, err := a.c.SendToDevices(ctx, tc.to, tc.id, make([]byte, tc.size))
					require.ErrorIs(t, err, store.ErrInvalidArgument)
					require.Nil(t, outs)
					require.Empty(t, net.Calls())
					require.Equal(t, before, a.snapshot(bobs...))
				})
			}
			u := mustOpenUninitialized(t, kind, net, net)
			outs, err := u.c.SendToDevices(ctx, bobs, store.NewLogicalMessageID(), []byte("x"))
			require.ErrorIs(t, err, client.ErrNotInitialized)
			require.Nil(t, outs)
		})
	}
}

// TestSendToDevicesCommitsBeforeHandOffs: while the first hand-off of a
// fan-out is blocked, every device's row and session are already stored
// (one transaction before any hand-off), and an abandon waits for the
// fan-out to end (send mutex).
func TestSendToDevicesCommitsBeforeHandOffs(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, h, a := openHeld(t, kind)
			_, _, b3 := openBobs(t, kind, net)

			h.arm()
			id := store.NewLogicalMessageID()
			type result struct {
				outs []client.DeviceOutcome
				err  error
			}
			done := make(chan result, 1)
			go func() {
				outs, err := a.c.SendToDevices(ctx, bobs, id, []byte("held"))
				done <- result{outs, err}
			}()
			<-h.entered // inside bob/1's hand-off
			for _, b := range bobs {
				n, err := a.st.PendingMessageCount(ctx, &b)
				require.NoError(t, err)
				require.EqualValues(t, 1, n, "%s's row is stored before the first hand-off", b)
				a.requireInitiation(b, true)
			}
			abandoned := a.startAbandons(ctx, bob3, id)
			requireNoAbandonYet(t, abandoned, "the fan-out")
			require.Equal(t, bobs, a.pendingTo(id))
			close(h.release)
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, []client.DeviceOutcome{{To: bob}, {To: bob2}, {To: bob3}}, r.outs)
			require.Equal(t, client.Abandoned, <-abandoned)
			require.Equal(t, []store.DeviceAddress{bob, bob2}, a.pendingTo(id))
			require.Equal(t, []string{"held"}, messages(t, b3.poll()), "handed off before the abandon ran")
		})
	}
}
