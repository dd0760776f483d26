package client_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// One store serves one client: a second client (New or Open) on a store
// that serves one is refused with store.ErrInUse and changes nothing, so
// two clients never encrypt under the same cached session. After Close,
// the closed client refuses every call that would use a session or the
// identity (store.ErrClosed), and a new client on the store carries the
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
			require.ErrorIs(t, err, store.ErrInUse)
			_, err = client.Open(context.Background(), a.config())
			require.ErrorIs(t, err, store.ErrInUse)
			if kind == sqliteKind {
				_, err := sqlitestore.Open(ctx, a.path, a.kr)
				require.ErrorIs(t, err, store.ErrInUse, "a second store on the file")
				require.ErrorContains(t, err, a.path)
			}
			require.Equal(t, hw, a.pendingIDs(nil), "refusals change nothing")
			a.send(bob, "still the first client")
			require.Equal(t, []string{"still the first client"}, messages(t, b.poll()))

			old := a.c
			require.NoError(t, old.Close())
			require.NoError(t, old.Close(), "closing twice is harmless")
			_, err = old.Send(ctx, bob, []byte("from a closed client"))
			require.ErrorIs(t, err, store.ErrClosed)
			_, err = old.RetryPendingMessages(ctx, bob)
			require.ErrorIs(t, err, store.ErrClosed)
			require.ErrorIs(t, old.Initialize(ctx, alice), store.ErrClosed)
			require.ErrorIs(t, old.RotateSignedPrekey(ctx), store.ErrClosed)
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

// storeSnapshot is what a call could change in d's store about peer, read
// from the store alone (a closed client answers nothing): every table of
// a SQLite device, the peer's stored state and the pending count of a
// memstore device.
func storeSnapshot(tb testing.TB, d *device, peer store.DeviceAddress) any {
	tb.Helper()
	if d.sql != nil {
		return dumpTables(tb, sqliteaccess.DB(d.sql))
	}
	ctx := context.Background()
	st, err := d.st.Peer(ctx, peer)
	require.NoError(tb, err)
	n, err := d.st.PendingMessageCount(ctx, nil)
	require.NoError(tb, err)
	return []any{st, n}
}

// waitForMutexWaiter returns once a goroutine whose stack names fn waits
// for a sync.Mutex.
func waitForMutexWaiter(tb testing.TB, fn string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, fn) {
				return
			}
		}
		runtime.Gosched()
	}
	tb.Fatalf("no goroutine in %s waits for a mutex", fn)
}

// A call that passed its early checks and then waited for Close (which
// holds the send mutex) fails with store.ErrClosed and writes nothing to the
// store, which may serve another client by then, and hands nothing off.
func TestCallWaitingForCloseWritesNothing(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		fn   string // the function that waits, as a stack names it
		call func(c *client.Client, pending store.LogicalMessageID) error
	}{
		{"Send", "(*Client).Send(", func(c *client.Client, _ store.LogicalMessageID) error {
			_, err := c.Send(ctx, bob, []byte("after close"))
			return err
		}},
		{"SendToDevices", "(*Client).SendToDevices(", func(c *client.Client, _ store.LogicalMessageID) error {
			_, err := c.SendToDevices(ctx, []store.DeviceAddress{bob}, store.NewLogicalMessageID(), []byte("after close"))
			return err
		}},
		{"RetryPendingMessages", "(*Client).RetryPendingMessages(", func(c *client.Client, _ store.LogicalMessageID) error {
			_, err := c.RetryPendingMessages(ctx, bob)
			return err
		}},
		{"AbandonPending", "(*Client).AbandonPending(", func(c *client.Client, pending store.LogicalMessageID) error {
			_, err := c.AbandonPending(ctx, bob, pending)
			return err
		}},
		{"Poll", "(*Client).Poll(", func(c *client.Client, _ store.LogicalMessageID) error {
			_, err := c.Poll(ctx) // bob's ACK waits in the mailbox
			return err
		}},
	} {
		for _, kind := range bothStores {
			t.Run(tt.name+"/"+string(kind), func(t *testing.T) {
				net, a, b := openPair(t, kind)
				pending := a.send(bob, "pending") // bob does not acknowledge it
				require.Equal(t, []string{"pending"}, messages(t, b.poll()))
				before := storeSnapshot(t, a, bob)
				net.ResetCalls()

				release := client.HoldSendMutex(a.c)
				done := make(chan error, 1)
				go func() { done <- tt.call(a.c, pending) }()
				waitForMutexWaiter(t, tt.fn)
				client.CloseHeld(a.c)
				release()

				require.ErrorIs(t, <-done, store.ErrClosed)
				require.Equal(t, before, storeSnapshot(t, a, bob), "the closed client changed its store")
				require.Empty(t, net.Calls(), "the closed client used the network")
			})
		}
	}
}
