package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
)

// TestAllPendingMessages: 250 messages to an offline device and a few to
// another, walked with a range loop over pages of store.MaxPageSize: every
// message once, in order, also across the page boundaries; one abandoned
// ahead of the walk at a page boundary is not yielded; the filter keeps
// one recipient's; a malformed recipient and an uninitialized client end
// the walk with their error, yielded once.
func TestAllPendingMessages(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a := openAlice(t, kind)
			mustOpenKind(t, kind, net, bob)
			mustOpenKind(t, kind, net, carol)
			net.FailNextSends(253)
			for i := range 253 {
				to := bob
				if i%100 == 50 {
					to = carol
				}
				_, err := a.c.Send(ctx, to, []byte(fmt.Sprint("message ", i)))
				require.ErrorIs(t, err, client.ErrMessageNotSent)
			}
			want := a.all(store.MaxPageSize, nil)
			require.Len(t, want, 253)

			var got []store.PendingMessage
			for m, err := range a.c.AllPendingMessages(ctx, nil) {
				require.NoError(t, err)
				got = append(got, m)
				if len(got) == store.MaxPageSize { // the last of the first page
					require.Equal(t, client.Abandoned, a.abandon(want[150].Recipient, want[150].ID))
				}
			}
			require.Equal(t, append(want[:150:150], want[151:]...), got)

			var toCarol []store.PendingMessage
			for m, err := range a.c.AllPendingMessages(ctx, &carol) {
				require.NoError(t, err)
				toCarol = append(toCarol, m)
			}
			require.Equal(t, []store.PendingMessage{want[50], want[250]}, toCarol, "the abandoned want[150] was carol's too")

			var errs []error
			for _, err := range a.c.AllPendingMessages(ctx, &store.DeviceAddress{UserID: "", DeviceID: 1}) {
				errs = append(errs, err)
			}
			require.Len(t, errs, 1)
			require.ErrorIs(t, errs[0], store.ErrInvalidArgument)

			u := mustOpenUninitialized(t, kind, net, net)
			errs = nil
			for m, err := range u.c.AllPendingMessages(ctx, nil) {
				require.Equal(t, store.PendingMessage{}, m)
				errs = append(errs, err)
			}
			require.Len(t, errs, 1)
			require.ErrorIs(t, errs[0], client.ErrNotInitialized)
		})
	}
}
