package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store/sqlitestore"
)

// One store serves one client: a second client (New or Open) on a store
// that serves one is refused with ErrStoreInUse and changes nothing, so
// two clients never encrypt under the same cached session. After Close,
// the closed client refuses every call that would use a session or the
// identity (ErrClosed), and a new client on the store carries the
// conversation on. A second SQLite store on the same file is refused too.
func TestOneClientPerStore(t *testing.T) {
	ctx := context.Background()
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			a.send(bob, "before")
			require.Equal(t, []string{"before"}, messages(t, b.poll()))
			require.Len(t, acks(a.poll()), 1)
			hw := a.pendingIDs(nil)

			_, err := client.Open(ctx, a.config())
			require.ErrorIs(t, err, client.ErrStoreInUse)
			_, err = client.New(a.config())
			require.ErrorIs(t, err, client.ErrStoreInUse)
			if kind == sqliteKind {
				_, err := sqlitestore.Open(ctx, a.path, a.kr)
				require.ErrorIs(t, err, client.ErrStoreInUse, "a second store on the file")
				require.ErrorContains(t, err, a.path)
			}
			require.Equal(t, hw, a.pendingIDs(nil), "refusals change nothing")
			a.send(bob, "still the first client")
			require.Equal(t, []string{"still the first client"}, messages(t, b.poll()))

			old := a.c
			require.NoError(t, old.Close())
			require.NoError(t, old.Close(), "closing twice is harmless")
			_, err = old.Send(ctx, bob, []byte("from a closed client"))
			require.ErrorIs(t, err, client.ErrClosed)
			_, err = old.RetryPendingMessages(ctx, bob)
			require.ErrorIs(t, err, client.ErrClosed)
			require.ErrorIs(t, old.Initialize(ctx, alice), client.ErrClosed)
			require.ErrorIs(t, old.RotateSignedPrekey(ctx), client.ErrClosed)
			require.Empty(t, b.poll(), "a closed client hands nothing off")

			c, err := client.Open(ctx, a.config())
			require.NoError(t, err)
			a.c = c
			require.Len(t, a.pendingIDs(nil), 1, "the closed client stored nothing")
			require.Len(t, acks(a.poll()), 1)
			require.Empty(t, a.pendingIDs(nil))
			a.send(bob, "after")
			require.Equal(t, []string{"after"}, messages(t, b.poll()))
			b.send(alice, "reply")
			require.Equal(t, []string{"reply"}, messages(t, a.poll()))
		})
	}
}
