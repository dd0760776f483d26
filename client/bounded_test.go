package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

// wholeMailbox is a transport of only transport.Transport: no bounded
// receive.
type wholeMailbox struct{ net *transporttest.Network }

func (w wholeMailbox) Send(ctx context.Context, to store.DeviceAddress, env []byte) error {
	return w.net.Send(ctx, to, env)
}

func (w wholeMailbox) Receive(ctx context.Context, me store.DeviceAddress) ([][]byte, error) {
	return w.net.Receive(ctx, me)
}

// receives counts the receive calls in calls.
func receives(calls []transporttest.Call) int {
	n := 0
	for _, c := range calls {
		if c.Op == transporttest.OpReceive {
			n++
		}
	}
	return n
}

// sendMany sends n numbered messages from a to to.
func sendMany(t *testing.T, a *device, to store.DeviceAddress, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("message %d", i))
		a.send(to, out[i])
	}
	return out
}

// TestPollAtMost: one call takes at most the bound, the mailbox keeps the
// rest in order; a bound below 1 is refused before the transport is
// asked; Poll takes a mailbox longer than a batch in several calls.
func TestPollAtMost(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			sent := sendMany(t, a, bob, 5)
			for _, bad := range []int{0, -1} {
				net.ResetCalls()
				res, err := b.c.PollAtMost(ctx, bad)
				require.ErrorIs(t, err, store.ErrInvalidArgument)
				require.Empty(t, res)
				require.Empty(t, net.Calls())
				require.Equal(t, 5, net.Pending(bob))
			}
			var got []string
			for _, tc := range []struct{ max, want, left int }{{2, 2, 3}, {1, 1, 2}, {10, 2, 0}, {3, 0, 0}} {
				net.ResetCalls()
				res, err := b.c.PollAtMost(ctx, tc.max)
				require.NoError(t, err)
				require.Len(t, res, tc.want)
				require.Equal(t, 1, receives(net.Calls()), "one transport call")
				require.Equal(t, tc.left, net.Pending(bob))
				finalize(t, b.c, res)
				got = append(got, messages(t, res)...)
			}
			require.Equal(t, sent, got, "in mailbox order")

			sent = sendMany(t, a, bob, client.PollBatch+3)
			net.ResetCalls()
			res := b.pollKeep()
			require.Equal(t, sent, messages(t, res))
			require.Equal(t, 2, receives(net.Calls()), "a batch, then the short rest")
		})
	}
}

// TestPollAtMostWholeMailbox: over a transport without a bounded receive,
// PollAtMost receives everything the transport hands over.
func TestPollAtMostWholeMailbox(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	a := mustOpenKind(t, memKind, net, alice)
	b := mustOpenVia(t, memKind, net, wholeMailbox{net}, bob)
	var _ transport.Transport = wholeMailbox{}
	_, bounded := any(wholeMailbox{}).(transport.BoundedReceiver)
	require.False(t, bounded)
	sent := sendMany(t, a, bob, 4)
	res, err := b.c.PollAtMost(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, sent, messages(t, res))
	require.Zero(t, net.Pending(bob))
}

// blockingReceiver is a transport whose receive, once armed, signals
// entered and waits for release: a slow network under a long backlog.
type blockingReceiver struct {
	net     *transporttest.Network
	bounded bool
	// block is the receive call (1 the first) that blocks.
	block   int
	mu      sync.Mutex
	calls   int
	entered chan struct{}
	release chan struct{}
}

func (b *blockingReceiver) Send(ctx context.Context, to store.DeviceAddress, env []byte) error {
	return b.net.Send(ctx, to, env)
}

func (b *blockingReceiver) wait() {
	b.mu.Lock()
	b.calls++
	n := b.calls
	b.mu.Unlock()
	if n == b.block {
		close(b.entered)
		<-b.release
	}
}

func (b *blockingReceiver) Receive(ctx context.Context, me store.DeviceAddress) ([][]byte, error) {
	b.wait()
	return b.net.Receive(ctx, me)
}

// boundedBlockingReceiver is blockingReceiver with a bounded receive.
type boundedBlockingReceiver struct{ *blockingReceiver }

func (b boundedBlockingReceiver) ReceiveAtMost(ctx context.Context, me store.DeviceAddress, max int) ([][]byte, error) {
	b.wait()
	return b.net.ReceiveAtMost(ctx, me, max)
}

// TestPollDoesNotHoldTheSendMutex: while a Poll waits on the transport
// (in the middle of a backlog longer than a batch, or in the one call of
// a transport without a bounded receive), a Send of the same client
// completes: the send mutex is held per envelope, never across the
// backlog.
func TestPollDoesNotHoldTheSendMutex(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bounded bool
		block   int
	}{
		{"between batches", true, 2},
		{"the first batch", true, 1},
		{"a whole-mailbox transport", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			net := transporttest.NewNetwork()
			a := mustOpenKind(t, memKind, net, alice)
			br := &blockingReceiver{net: net, block: tc.block, entered: make(chan struct{}), release: make(chan struct{})}
			var tr transport.Transport = br
			if tc.bounded {
				tr = boundedBlockingReceiver{br}
			}
			b := mustOpenVia(t, memKind, net, tr, bob)
			a.send(bob, "first")
			br.block++ // the poll below
			require.Equal(t, []string{"first"}, messages(t, b.poll()))
			a.poll()
			sent := sendMany(t, a, bob, client.PollBatch+5)

			type polled struct {
				res []client.ReceiveResult
				err error
			}
			done := make(chan polled, 1)
			go func() {
				res, err := b.c.Poll(ctx)
				done <- polled{res, err}
			}()
			<-br.entered
			sendDone := make(chan error, 1)
			go func() {
				_, err := b.c.Send(ctx, alice, []byte("while polling"))
				sendDone <- err
			}()
			select {
			case err := <-sendDone:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("Send waited for Poll's transport call: the send mutex is held across the backlog")
			}
			close(br.release)
			p := <-done
			require.NoError(t, p.err)
			require.Equal(t, sent, messages(t, p.res))
			require.Equal(t, []string{"while polling"}, messages(t, a.poll()))
		})
	}
}
