package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
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
				outs, err := a.c.SendToDevices(ctx, []ids.DeviceAddress{bob}, ids.NewLogicalMessageID(), []byte("hi"))
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
