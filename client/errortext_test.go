package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// A send that fails past its checks names its call and its device once:
// the client's part of the error (up to the transport's or directory's
// own words, which an outside implementation chooses) says "client: "
// once and the device once, for Send, SendToDevices and a retry, whether
// the bundle's fetch, the encrypt policy or the hand-off failed.
func TestSendErrorsNameTheDeviceOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		fail func(a *device)
	}{
		{"fetch fails", func(a *device) { a.net.FailNextFetches(1) }},
		{"encrypt policy refuses", func(a *device) { a.failEncryptions(1) }},
		{"hand-off fails", func(a *device) { a.net.FailNextSends(1) }},
	} {
		for _, call := range []struct {
			name string
			run  func(t *testing.T, a *device) error
		}{
			{"Send", func(t *testing.T, a *device) error { _, err := a.c.Send(ctx, bob, []byte("hi")); return err }},
			{"SendToDevices", func(t *testing.T, a *device) error {
				outs, err := a.c.SendToDevices(ctx, []store.DeviceAddress{bob}, store.NewLogicalMessageID(), []byte("hi"))
				require.Len(t, outs, 1)
				require.Error(t, outs[0].Err)
				require.Error(t, err)
				return outs[0].Err
			}},
			{"RetryPendingMessages", func(t *testing.T, a *device) error {
				tc.fail(a)
				_, err := a.c.Send(ctx, bob, []byte("hi"))
				require.ErrorIs(t, err, client.ErrMessageNotSent)
				tc.fail(a)
				_, err = a.c.RetryPendingMessages(ctx, bob)
				return err
			}},
		} {
			t.Run(tc.name+"/"+call.name, func(t *testing.T) {
				_, a, _ := openPair(t, sqliteKind)
				if call.name != "RetryPendingMessages" {
					tc.fail(a)
				}
				err := call.run(t, a)
				require.ErrorIs(t, err, client.ErrMessageNotSent)
				msg := err.Error()
				own, _, _ := strings.Cut(msg, "transport: ")
				require.Equal(t, 1, strings.Count(own, "client: "), "%q says the client's context twice", msg)
				require.Equal(t, 1, strings.Count(own, bob.String()), "%q names the device more than once", msg)
			})
		}
	}
}

// Settling an identity change that is not there names the device once,
// whether the client finds no pin or the pin finds no change; so does an
// ACK the store fails to commit.
func TestSettleAndReceiveErrorsNameTheDeviceOnce(t *testing.T) {
	ctx := context.Background()
	requireOnce := func(t *testing.T, err error, addr store.DeviceAddress) {
		t.Helper()
		require.Error(t, err)
		msg := err.Error()
		require.Equal(t, 1, strings.Count(msg, "client: "), "%q says the client's context twice", msg)
		require.Equal(t, 1, strings.Count(msg, addr.String()), "%q names the device more than once", msg)
	}
	t.Run("no pin", func(t *testing.T) {
		_, a, b := openPair(t, sqliteKind)
		err := a.c.AcceptRemoteIdentityChange(ctx, b.addr, session.PublicIdentity{})
		require.ErrorIs(t, err, session.ErrNoIdentityChange)
		requireOnce(t, err, b.addr)
	})
	for _, verb := range []string{"accept", "decline"} {
		t.Run("no change/"+verb, func(t *testing.T) {
			_, a, b := openPair(t, sqliteKind)
			converse(t, a, b)
			settle := a.c.AcceptRemoteIdentityChange
			if verb == "decline" {
				settle = a.c.DeclineRemoteIdentityChange
			}
			err := settle(ctx, b.addr, a.pinnedIdentity(b.addr))
			require.ErrorIs(t, err, session.ErrNoIdentityChange)
			requireOnce(t, err, b.addr)
		})
	}
	t.Run("ack not committed", func(t *testing.T) {
		net, a, b := openPair(t, sqliteKind)
		a.send(b.addr, "hi")
		b.poll() // bob's ACK waits in alice's mailbox
		acks, err := net.Receive(ctx, a.addr)
		require.NoError(t, err)
		require.Len(t, acks, 1)
		require.NoError(t, a.st.Close())
		_, err = a.c.Receive(ctx, acks[0])
		require.ErrorIs(t, err, store.ErrClosed)
		requireOnce(t, err, b.addr)
	})
}
