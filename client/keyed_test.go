package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
)

// sendWithID sends text to to under id and returns again.
func (d *device) sendWithID(to store.DeviceAddress, id store.LogicalMessageID, text string) bool {
	d.tb.Helper()
	again, err := d.c.SendWithID(context.Background(), to, id, []byte(text))
	require.NoError(d.tb, err)
	return again
}

// inApp is what reached an application from res: the ids of the
// messages given for the first time (not Again, not a *Duplicate).
func inApp(res []client.ReceiveResult) []store.LogicalMessageID {
	var out []store.LogicalMessageID
	for _, r := range res {
		if m, ok := r.(*client.Message); ok && !m.Again {
			out = append(out, m.ID)
		}
	}
	return out
}

// duplicates returns the ids of the *Duplicate results of res.
func duplicates(res []client.ReceiveResult) []store.LogicalMessageID {
	var out []store.LogicalMessageID
	for _, r := range res {
		if d, ok := r.(*client.Duplicate); ok {
			out = append(out, d.ID)
		}
	}
	return out
}

// TestSendWithIDAgainIsARetry: an id sent again while pending stores no
// second row (same sequence), hands the message off again and says so;
// the recipient gives it to its application once. Once acknowledged, the
// same id sent again is stored and sent, and the recipient drops it as a
// duplicate: its application never sees it again. Other recipients'
// rows are not touched.
func TestSendWithIDAgainIsARetry(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a, b := openPair(t, kind)
			converse(t, a, b)
			mustOpenKind(t, kind, net, carol)
			other := a.send(carol, "for carol, never delivered")
			carolBefore := a.all(store.MaxPageSize, &carol)

			id := store.NewLogicalMessageID()
			require.False(t, a.sendWithID(bob, id, "hello"))
			first := a.all(store.MaxPageSize, &bob)
			require.Len(t, first, 1)
			require.Equal(t, id, first[0].ID)

			net.ResetCalls()
			require.True(t, a.sendWithID(bob, id, "hello"), "pending: a retry")
			require.Equal(t, 1, sendsTo(net.Calls(), bob), "handed off again")
			require.Equal(t, first, a.all(store.MaxPageSize, &bob), "no second row, the same sequence")
			require.Equal(t, carolBefore, a.all(store.MaxPageSize, &carol), "another recipient's row is not touched")

			res := b.poll()
			require.Equal(t, []store.LogicalMessageID{id}, inApp(res), "given to the application once")
			require.Len(t, res, 2, "the retry is the same message again")
			a.poll()
			require.Zero(t, a.count(&bob), "acknowledged")

			// Acknowledged: sent again, dropped by bob as a duplicate.
			require.False(t, a.sendWithID(bob, id, "hello"))
			res = b.poll()
			require.Empty(t, inApp(res), "a processed id reaches the application zero more times")
			require.Equal(t, []store.LogicalMessageID{id}, duplicates(res))
			a.poll()
			require.Zero(t, a.count(&bob))
			require.Equal(t, []store.LogicalMessageID{other}, a.pendingIDs(nil))
		})
	}
}

// TestSendWithIDAfterFailedHandOff: a message stored but not handed off
// (a crash between the commit and the hand-off leaves the same) is sent
// again under its id after a restart: one row, delivered once.
func TestSendWithIDAfterFailedHandOff(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	converse(t, a, b)
	id := store.NewLogicalMessageID()
	net.FailNextSends(1)
	again, err := a.c.SendWithID(ctx, bob, id, []byte("survives"))
	require.ErrorIs(t, err, client.ErrMessageNotSent)
	require.False(t, again)
	require.Zero(t, net.Pending(bob))
	stored := a.all(store.MaxPageSize, &bob)

	a.reopen()
	require.True(t, a.sendWithID(bob, id, "survives"))
	require.Equal(t, stored, a.all(store.MaxPageSize, &bob))
	res := b.poll()
	require.Equal(t, []store.LogicalMessageID{id}, inApp(res))
	a.poll()
	require.Zero(t, a.count(nil))
}

// TestSendWithIDNotEncrypted: a message stored without encryption (the
// policy refused it) and sent again under its id, refused again, is the
// same pending row, reported again and not sent; allowed, it is sent.
func TestSendWithIDNotEncrypted(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			_, a, b := openPair(t, kind)
			id := store.NewLogicalMessageID()
			for _, want := range []bool{false, true} {
				a.failEncryptions(1)
				again, err := a.c.SendWithID(ctx, bob, id, []byte("refused"))
				require.ErrorIs(t, err, client.ErrMessageNotSent)
				require.Equal(t, want, again)
				require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil))
			}
			require.True(t, a.sendWithID(bob, id, "refused"))
			require.Equal(t, []store.LogicalMessageID{id}, inApp(b.poll()))
			a.poll()
			require.Zero(t, a.count(nil))
		})
	}
}

// TestSendWithIDBadInput: the zero id and an id pending with another
// plaintext are refused with their own errors, and change nothing: no
// row, no session, nothing handed off.
func TestSendWithIDBadInput(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			converse(t, a, b)
			id := store.NewLogicalMessageID()
			require.False(t, a.sendWithID(bob, id, "the message"))
			for _, tc := range []struct {
				name string
				id   store.LogicalMessageID
				text string
				want error
			}{
				{"zero id", store.LogicalMessageID{}, "anything", store.ErrInvalidArgument},
				{"pending with another plaintext", id, "another message", client.ErrLogicalIDReused},
				{"pending with a longer plaintext", id, "the message, longer", client.ErrLogicalIDReused},
				{"pending with an empty plaintext", id, "", client.ErrLogicalIDReused},
			} {
				t.Run(tc.name, func(t *testing.T) {
					before := a.snapshot(bob)
					net.ResetCalls()
					again, err := a.c.SendWithID(ctx, bob, tc.id, []byte(tc.text))
					require.ErrorIs(t, err, tc.want)
					require.NotErrorIs(t, err, client.ErrMessageNotSent)
					require.False(t, again)
					require.Equal(t, before, a.snapshot(bob), "nothing changed")
					require.Zero(t, sendsTo(net.Calls(), bob), "nothing handed off")
				})
			}
			// The sessions are as stored: the pending message is retried
			// and delivered.
			require.True(t, a.sendWithID(bob, id, "the message"))
			res := b.poll()
			require.Equal(t, []store.LogicalMessageID{id}, inApp(res))
			require.Equal(t, []string{"the message", "the message"}, messages(t, res))
		})
	}
}

// TestSendToDevicesAgain: a logical message sent again to the same
// devices retries each device's pending row and stores a new one only
// for a device that acknowledged it (which drops it as a duplicate);
// sent again to another set, each listed device is judged by its own row
// and the unlisted device's row is not touched. Every device's
// application gets it once.
func TestSendToDevicesAgain(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			net, a := openAlice(t, kind)
			b1, b2, b3 := openBobs(t, kind, net)
			id := store.NewLogicalMessageID()
			require.Equal(t, []client.DeviceOutcome{{To: bob}, {To: bob2}, {To: bob3}}, a.fanout(bobs, id, "to every bob"))
			require.Equal(t, []store.LogicalMessageID{id}, inApp(b1.poll()))
			a.poll() // bob/1's ACK
			require.Zero(t, a.count(&bob))
			pending2, pending3 := a.all(store.MaxPageSize, &bob2), a.all(store.MaxPageSize, &bob3)

			require.Equal(t, []client.DeviceOutcome{{To: bob}, {To: bob2, Again: true}, {To: bob3, Again: true}},
				a.fanout(bobs, id, "to every bob"))
			require.Equal(t, pending2, a.all(store.MaxPageSize, &bob2), "no second row for bob/2")
			require.Equal(t, pending3, a.all(store.MaxPageSize, &bob3), "no second row for bob/3")
			res := b1.poll()
			require.Empty(t, inApp(res))
			require.Equal(t, []store.LogicalMessageID{id}, duplicates(res))

			// Another set: bob/3 and carol; bob/2's row stays as it is.
			mustOpenKind(t, kind, net, carol)
			require.Equal(t, []client.DeviceOutcome{{To: bob3, Again: true}, {To: carol}},
				a.fanout([]store.DeviceAddress{bob3, carol}, id, "to every bob"))
			require.Equal(t, pending2, a.all(store.MaxPageSize, &bob2))
			require.Equal(t, pending3, a.all(store.MaxPageSize, &bob3))

			res = b2.poll()
			require.Equal(t, []store.LogicalMessageID{id}, inApp(res))
			require.Len(t, res, 2)
			res = b3.poll()
			require.Equal(t, []store.LogicalMessageID{id}, inApp(res))
			require.Len(t, res, 3)
			a.poll()
			require.Equal(t, []store.LogicalMessageID{id}, a.pendingIDs(nil), "carol's, not polled")
		})
	}
}

// TestSendToDevicesAgainOtherPlaintext: a device of the set holding id
// pending with another plaintext refuses the whole call; nothing is
// stored or handed off for any device.
func TestSendToDevicesAgainOtherPlaintext(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a := openAlice(t, kind)
			openBobs(t, kind, net)
			id := store.NewLogicalMessageID()
			a.fanout([]store.DeviceAddress{bob, bob2}, id, "first")
			before := a.snapshot(bobs...)
			net.ResetCalls()
			outs, err := a.c.SendToDevices(ctx, []store.DeviceAddress{bob3, bob2}, id, []byte("second"))
			require.ErrorIs(t, err, client.ErrLogicalIDReused)
			require.Nil(t, outs)
			require.Equal(t, before, a.snapshot(bobs...))
			for _, b := range bobs {
				require.Zero(t, sendsTo(net.Calls(), b), "nothing handed off to %s", b)
			}
		})
	}
}
