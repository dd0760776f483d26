package transporttest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

var (
	alice = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob   = store.DeviceAddress{UserID: "bob", DeviceID: 1}
)

func env(i int) []byte { return []byte(fmt.Sprintf("envelope-%d", i)) }

func receive(t *testing.T, n *transporttest.Network, me store.DeviceAddress) [][]byte {
	t.Helper()
	got, err := n.Receive(context.Background(), me)
	require.NoError(t, err)
	return got
}

func TestSendReceiveFIFOAndCopies(t *testing.T) {
	ctx := context.Background()
	n := transporttest.NewNetwork()
	e := env(0)
	require.NoError(t, n.Send(ctx, bob, e))
	require.NoError(t, n.Send(ctx, bob, env(1)))
	e[0] = 'X' // the caller's buffer is not aliased
	require.Equal(t, 2, n.Pending(bob))
	require.Empty(t, receive(t, n, alice))
	require.Equal(t, [][]byte{env(0), env(1)}, receive(t, n, bob))
	require.Empty(t, receive(t, n, bob), "receive drains the mailbox")
}

func TestSendRejects(t *testing.T) {
	n := transporttest.NewNetwork()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		to   store.DeviceAddress
		env  []byte
		want error
	}{
		{"canceled context", ctx, bob, env(0), context.Canceled},
		{"invalid address", context.Background(), store.DeviceAddress{}, env(0), store.ErrInvalidArgument},
		{"empty envelope", context.Background(), bob, nil, transport.ErrEnvelopeTooLarge},
		{"oversized envelope", context.Background(), bob, make([]byte, session.MaxEnvelopeSize+1), transport.ErrEnvelopeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, n.Send(tt.ctx, tt.to, tt.env), tt.want)
		})
	}
	require.Zero(t, n.Pending(bob))
	_, err := n.Receive(ctx, bob)
	require.ErrorIs(t, err, context.Canceled)
}

func TestSendFaultInjection(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		inject  func(*transporttest.Network)
		errs    []error // per send of env(0..)
		deliver [][]byte
	}{
		{"fail next two", func(n *transporttest.Network) { n.FailNextSends(2) },
			[]error{transporttest.ErrInjected, transporttest.ErrInjected, nil}, [][]byte{env(2)}},
		{"drop next one", func(n *transporttest.Network) { n.DropNext(1) },
			[]error{nil, nil, nil}, [][]byte{env(1), env(2)}},
		{"duplicate next two", func(n *transporttest.Network) { n.DuplicateNext(2) },
			[]error{nil, nil, nil}, [][]byte{env(0), env(0), env(1), env(1), env(2)}},
		{"fail before drop", func(n *transporttest.Network) { n.FailNextSends(1); n.DropNext(1) },
			[]error{transporttest.ErrInjected, nil, nil}, [][]byte{env(2)}},
		{"reset to zero", func(n *transporttest.Network) { n.FailNextSends(3); n.FailNextSends(0) },
			[]error{nil, nil, nil}, [][]byte{env(0), env(1), env(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := transporttest.NewNetwork()
			tt.inject(n)
			for i, want := range tt.errs {
				err := n.Send(ctx, bob, env(i))
				if want == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, want)
				}
			}
			require.Equal(t, tt.deliver, receive(t, n, bob))
			// Every call is logged, failed ones with their error.
			calls := n.Calls()
			require.Len(t, calls, len(tt.errs)+1)
			for i, want := range tt.errs {
				require.Equal(t, transporttest.OpSend, calls[i].Op)
				require.Equal(t, env(i), calls[i].Envelope)
				require.Equal(t, bob, calls[i].To)
				if want == nil {
					require.NoError(t, calls[i].Err)
				} else {
					require.ErrorIs(t, calls[i].Err, want)
				}
			}
			require.Equal(t, transporttest.OpReceive, calls[len(tt.errs)].Op)
			require.Equal(t, len(tt.deliver), calls[len(tt.errs)].Count)
		})
	}
}

func TestFailNextReceives(t *testing.T) {
	ctx := context.Background()
	n := transporttest.NewNetwork()
	require.NoError(t, n.Send(ctx, bob, env(0)))
	n.FailNextReceives(1)
	_, err := n.Receive(ctx, bob)
	require.ErrorIs(t, err, transporttest.ErrInjected)
	require.Equal(t, 1, n.Pending(bob), "a failed receive loses nothing")
	require.Equal(t, [][]byte{env(0)}, receive(t, n, bob))
}

func TestReorderMailbox(t *testing.T) {
	ctx := context.Background()
	fill := func() *transporttest.Network {
		n := transporttest.NewNetwork()
		for i := range 20 {
			require.NoError(t, n.Send(ctx, bob, env(i)))
		}
		return n
	}
	n1, n2 := fill(), fill()
	n1.ReorderMailbox(bob, 42)
	n2.ReorderMailbox(bob, 42)
	got1, got2 := receive(t, n1, bob), receive(t, n2, bob)
	require.Equal(t, got1, got2, "deterministic for a seed")

	var inOrder [][]byte
	for i := range 20 {
		inOrder = append(inOrder, env(i))
	}
	require.NotEqual(t, inOrder, got1)
	sorted := slices.Clone(got1)
	slices.SortFunc(sorted, func(a, b []byte) int { return slices.Compare(a, b) })
	want := slices.Clone(inOrder)
	slices.SortFunc(want, func(a, b []byte) int { return slices.Compare(a, b) })
	require.Equal(t, want, sorted, "a permutation: nothing lost or added")

	n1.ReorderMailbox(alice, 1) // empty mailbox: no-op
	require.Zero(t, n1.Pending(alice))
}

func newBundle(t *testing.T, addr store.DeviceAddress, nOneTime int) (*session.Identity, *session.Prekeys, session.Bundle) {
	t.Helper()
	id, err := session.GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	pk, err := session.NewPrekeys(rand.Reader, id, nOneTime)
	require.NoError(t, err)
	return id, pk, pk.Bundle(addr)
}

func TestDirectoryPublishFetch(t *testing.T) {
	ctx := context.Background()
	n := transporttest.NewNetwork()
	_, err := n.Fetch(ctx, bob)
	require.ErrorIs(t, err, transport.ErrNoBundle)

	_, pk, b := newBundle(t, bob, 2)
	require.NoError(t, n.Publish(ctx, b))

	// Each fetch hands out one one-time prekey, and never the same one.
	f1, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.NoError(t, f1.Verify())
	require.Len(t, f1.OneTimePrekeys, 1)
	require.Equal(t, b.OneTimePrekeys[0], f1.OneTimePrekeys[0])

	n.FailNextFetches(1)
	_, err = n.Fetch(ctx, bob)
	require.ErrorIs(t, err, transporttest.ErrInjected)

	f2, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.Equal(t, b.OneTimePrekeys[1], f2.OneTimePrekeys[0])
	f3, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.Empty(t, f3.OneTimePrekeys, "exhausted: signed prekey only")
	require.NoError(t, f3.Verify())

	// Republishing the same prekeys (still holding both one-time keys)
	// does not offer the handed-out ones again; new ones are offered.
	require.NoError(t, pk.AddOneTime(rand.Reader, 1))
	require.NoError(t, n.Publish(ctx, pk.Bundle(bob)))
	f4, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.Len(t, f4.OneTimePrekeys, 1)
	require.Equal(t, uint32(3), f4.OneTimePrekeys[0].ID)

	// A forged bundle is refused and does not replace the published one.
	forged := pk.Bundle(bob)
	forged.Signature[0] ^= 1
	err = n.Publish(ctx, forged)
	require.ErrorIs(t, err, session.ErrBadSignature)
	require.ErrorContains(t, err, bob.String(), "the error names the bundle refused")
	n.FailNextPublishes(1)
	require.ErrorIs(t, n.Publish(ctx, pk.Bundle(bob)), transporttest.ErrInjected)
	f5, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.NoError(t, f5.Verify())

	// Mutating a fetched bundle does not affect the directory.
	f5.Signature[0] ^= 1
	f6, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.NoError(t, f6.Verify())

	// A new identity (reinstall) starts afresh.
	_, _, b2 := newBundle(t, bob, 1)
	require.NoError(t, n.Publish(ctx, b2))
	f7, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.Equal(t, b2.Identity, f7.Identity)
	require.Len(t, f7.OneTimePrekeys, 1)
}

func TestCallLog(t *testing.T) {
	ctx := context.Background()
	n := transporttest.NewNetwork()
	_, _, b := newBundle(t, bob, 1)
	require.NoError(t, n.Publish(ctx, b))
	_, err := n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.NoError(t, n.Send(ctx, bob, env(7)))
	_, err = n.Receive(ctx, bob)
	require.NoError(t, err)
	_, err = n.Fetch(ctx, alice)
	require.ErrorIs(t, err, transport.ErrNoBundle)

	calls := n.Calls()
	require.Len(t, calls, 5)
	require.Equal(t, []string{"publish", "fetch", "send", "receive", "fetch"},
		[]string{calls[0].Op, calls[1].Op, calls[2].Op, calls[3].Op, calls[4].Op})
	require.Equal(t, bob, calls[0].From)
	require.Equal(t, bob, calls[1].To)
	require.Equal(t, env(7), calls[2].Envelope)
	require.Equal(t, store.DeviceAddress{}, calls[2].From, "not a parseable envelope: sender unknown")
	require.Equal(t, 1, calls[3].Count)
	require.ErrorIs(t, calls[4].Err, transport.ErrNoBundle)

	calls[2].Envelope[0] = 'X'
	require.Equal(t, env(7), n.Calls()[2].Envelope, "Calls returns copies")

	n.ResetCalls()
	require.Empty(t, n.Calls())
	require.Zero(t, n.Pending(bob), "ResetCalls does not touch mailboxes")
}

func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	n := transporttest.NewNetwork()
	const senders, perSender, receivers = 8, 200, 4
	recipients := make([]store.DeviceAddress, receivers)
	for i := range recipients {
		recipients[i] = store.DeviceAddress{UserID: "r", DeviceID: int64(i)}
	}
	_, _, b := newBundle(t, bob, 100)
	require.NoError(t, n.Publish(ctx, b))

	var wg sync.WaitGroup
	var mu sync.Mutex
	received := make(map[string]int)
	done := make(chan struct{})
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				to := recipients[(s+i)%receivers]
				assert.NoError(t, n.Send(ctx, to, []byte(fmt.Sprintf("%d/%d", s, i))))
			}
		})
	}
	var fetched sync.Map
	for range 4 {
		wg.Go(func() {
			for range 30 {
				f, err := n.Fetch(ctx, bob)
				if !assert.NoError(t, err) {
					return
				}
				for _, k := range f.OneTimePrekeys {
					_, dup := fetched.LoadOrStore(k.ID, true)
					assert.False(t, dup, "one-time prekey %d handed out twice", k.ID)
				}
			}
		})
	}
	var rwg sync.WaitGroup
	for _, r := range recipients {
		rwg.Go(func() {
			drain := func() {
				got, err := n.Receive(ctx, r)
				assert.NoError(t, err)
				mu.Lock()
				for _, e := range got {
					received[string(e)]++
				}
				mu.Unlock()
			}
			for {
				select {
				case <-done:
					drain()
					return
				default:
					drain()
					_ = n.Calls()
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rwg.Wait()

	require.Len(t, received, senders*perSender)
	for k, c := range received {
		require.Equal(t, 1, c, "envelope %s delivered %d times", k, c)
	}
	count := 0
	fetched.Range(func(any, any) bool { count++; return true })
	require.Equal(t, 100, count)
}

// TestOneTimePrekeyCount: the count is what fetches can still hand out;
// it follows fetches and republications, fails like a fetch, and is
// logged.
func TestOneTimePrekeyCount(t *testing.T) {
	ctx := context.Background()
	n := transporttest.NewNetwork()
	_, err := n.OneTimePrekeyCount(ctx, bob)
	require.ErrorIs(t, err, transport.ErrNoBundle)
	_, err = n.OneTimePrekeyCount(ctx, store.DeviceAddress{})
	require.ErrorIs(t, err, store.ErrInvalidArgument)

	_, pk, b := newBundle(t, bob, 3)
	require.NoError(t, n.Publish(ctx, b))
	count := func() int {
		t.Helper()
		c, err := n.OneTimePrekeyCount(ctx, bob)
		require.NoError(t, err)
		return c
	}
	require.Equal(t, 3, count())
	_, err = n.Fetch(ctx, bob)
	require.NoError(t, err)
	require.Equal(t, 2, count())
	n.FailNextFetches(1)
	_, err = n.OneTimePrekeyCount(ctx, bob)
	require.ErrorIs(t, err, transporttest.ErrInjected)

	// Republishing with two more: the handed-out one is not counted.
	_, err = pk.Replenish(rand.Reader, 2)
	require.NoError(t, err)
	require.NoError(t, n.Publish(ctx, pk.Bundle(bob)))
	require.Equal(t, 4, count())

	n.ResetCalls()
	require.Equal(t, 4, count())
	calls := n.Calls()
	require.Len(t, calls, 1)
	require.Equal(t, transporttest.Call{Op: transporttest.OpCount, To: bob, Count: 4}, calls[0])
}

// ReceiveAtMost takes the head of the mailbox and leaves the rest in
// order; a refused or failed call leaves the mailbox as it was.
func TestReceiveAtMost(t *testing.T) {
	ctx := context.Background()
	n := transporttest.NewNetwork()
	for i := range 5 {
		require.NoError(t, n.Send(ctx, bob, env(i)))
	}
	require.NoError(t, n.Send(ctx, alice, env(9)))
	for _, tc := range []struct {
		name string
		max  int
		err  error
		want [][]byte
		left int
	}{
		{"zero is refused", 0, store.ErrInvalidArgument, nil, 5},
		{"negative is refused", -1, store.ErrInvalidArgument, nil, 5},
		{"the first two", 2, nil, [][]byte{env(0), env(1)}, 3},
		{"one", 1, nil, [][]byte{env(2)}, 2},
		{"more than are left", 10, nil, [][]byte{env(3), env(4)}, 0},
		{"an empty mailbox", 3, nil, [][]byte{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := n.ReceiveAtMost(ctx, bob, tc.max)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Nil(t, got)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}
			require.Equal(t, tc.left, n.Pending(bob))
			require.Equal(t, 1, n.Pending(alice), "another mailbox is not touched")
		})
	}
	t.Run("a failed receive loses nothing", func(t *testing.T) {
		require.NoError(t, n.Send(ctx, bob, env(5)))
		n.FailNextReceives(1)
		_, err := n.ReceiveAtMost(ctx, bob, 1)
		require.ErrorIs(t, err, transporttest.ErrInjected)
		require.Equal(t, 1, n.Pending(bob))
	})
	t.Run("what was handed out is not written over by later sends", func(t *testing.T) {
		require.NoError(t, n.Send(ctx, bob, env(6)))
		got, err := n.ReceiveAtMost(ctx, bob, 1)
		require.NoError(t, err)
		require.NoError(t, n.Send(ctx, bob, env(7)))
		require.Equal(t, [][]byte{env(5)}, got)
		require.Equal(t, [][]byte{env(6), env(7)}, receive(t, n, bob))
	})
}
