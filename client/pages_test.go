package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
)

// TestPageArguments: limits outside 1..MaxPageSize, a negative cursor and
// a malformed recipient are store.ErrInvalidArgument; the bounds are accepted.
func TestPageArguments(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			_, a, _ := openPair(t, kind)
			a.send(bob, "m")
			tests := []struct {
				name string
				req  store.PageRequest
				ok   bool
			}{
				{"limit 0", store.PageRequest{Limit: 0}, false},
				{"limit -1", store.PageRequest{Limit: -1}, false},
				{"limit 101", store.PageRequest{Limit: store.MaxPageSize + 1}, false},
				{"negative cursor", store.PageRequest{Limit: 10, After: ptr[int64](-1)}, false},
				{"negative cursor, filtered", store.PageRequest{Limit: 10, After: ptr[int64](-5), Recipient: &bob}, false},
				{"bad recipient", store.PageRequest{Limit: 10, Recipient: &store.DeviceAddress{UserID: "", DeviceID: 1}}, false},
				{"limit 1", store.PageRequest{Limit: 1}, true},
				{"limit 100", store.PageRequest{Limit: store.MaxPageSize}, true},
				{"cursor 0", store.PageRequest{Limit: 10, After: ptr[int64](0)}, true},
				{"cursor far ahead", store.PageRequest{Limit: 10, After: ptr[int64](1 << 60)}, true},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					page, err := a.c.PendingMessages(ctx, tc.req)
					if tc.ok {
						require.NoError(t, err)
						require.Nil(t, page.NextAfterSequence)
						return
					}
					require.ErrorIs(t, err, store.ErrInvalidArgument)
					require.Empty(t, page.Messages)
				})
			}
			_, err := a.c.PendingMessageCount(ctx, &store.DeviceAddress{UserID: "x", DeviceID: -1})
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			_, err = a.c.AbandonPending(ctx, store.DeviceAddress{}, store.NewLogicalMessageID())
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.EqualValues(t, 1, a.count(nil))
		})
	}
}

// TestPagination: pages in ascending global sequence, NextAfterSequence
// is the last returned sequence and nil on the last page (also when the
// last page is exactly full), the recipient filter uses the same cursor
// and can continue from any sequence, and count agrees.
func TestPagination(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a := openAlice(t, kind)
			for _, r := range []store.DeviceAddress{bob, carol} {
				mustOpenKind(t, kind, net, r)
			}
			type sent struct {
				to  store.DeviceAddress
				id  store.LogicalMessageID
				txt string
			}
			var all []sent
			for i := range 25 {
				to := bob
				if i%3 == 0 {
					to = carol
				}
				txt := fmt.Sprintf("m%02d", i)
				all = append(all, sent{to, a.send(to, txt), txt})
			}
			require.EqualValues(t, 25, a.count(nil))
			require.EqualValues(t, 9, a.count(&carol))
			require.EqualValues(t, 16, a.count(&bob))
			require.Zero(t, a.count(&dave))

			for _, limit := range []int{1, 4, 5, 25, 100} {
				got := a.all(limit, nil)
				require.Len(t, got, 25)
				for i, m := range got {
					require.Equal(t, all[i].id, m.ID)
					require.Equal(t, all[i].to, m.Recipient)
					require.Equal(t, all[i].txt, string(m.Plaintext))
				}
				require.Len(t, a.all(limit, &bob), 16)
				require.Len(t, a.all(limit, &carol), 9)
			}
			// An exactly full last page has no next cursor.
			page, err := a.c.PendingMessages(ctx, store.PageRequest{Limit: 25})
			require.NoError(t, err)
			require.Len(t, page.Messages, 25)
			require.Nil(t, page.NextAfterSequence)
			page, err = a.c.PendingMessages(ctx, store.PageRequest{Limit: 24})
			require.NoError(t, err)
			require.Equal(t, page.Messages[23].Sequence, *page.NextAfterSequence)

			// A filtered walk continues from any global sequence, also one
			// of another recipient or an unfiltered page's cursor.
			everything := a.all(100, nil)
			for i, m := range everything {
				after := m.Sequence
				page, err := a.c.PendingMessages(ctx, store.PageRequest{After: &after, Limit: 3, Recipient: &bob})
				require.NoError(t, err)
				want := []store.LogicalMessageID{}
				for _, w := range everything[i+1:] {
					if w.Recipient == bob && len(want) < 3 {
						want = append(want, w.ID)
					}
				}
				require.Equal(t, want, idsOf(page.Messages), "after %d", after)
			}
			// Empty recipient: empty last page.
			page, err = a.c.PendingMessages(ctx, store.PageRequest{Limit: 10, Recipient: &dave})
			require.NoError(t, err)
			require.Empty(t, page.Messages)
			require.Nil(t, page.NextAfterSequence)
		})
	}
}

// TestPlaintextIsACopy: changing a returned plaintext changes nothing
// stored.
func TestPlaintextIsACopy(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			input := []byte("original")
			_, err := a.c.Send(context.Background(), bob, input)
			require.NoError(t, err)
			copy(input, "XXXXXXXX") // the caller's buffer is not kept either
			first := a.all(10, nil)
			require.Equal(t, "original", string(first[0].Plaintext))
			for i := range first[0].Plaintext {
				first[0].Plaintext[i] = '!'
			}
			first[0].Plaintext = append(first[0].Plaintext, "more"...)
			again := a.all(10, &bob)
			require.Equal(t, "original", string(again[0].Plaintext))
			require.Equal(t, []string{"original"}, messages(t, b.poll()))
			a.poll()
			// Retry reads the stored plaintext too.
			require.Zero(t, a.count(nil))
		})
	}
}

// TestSequenceNeverReused: sequences strictly increase across sends,
// ACKs and abandons, also of the highest one, and across a restart.
func TestSequenceNeverReused(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			var last int64
			seqOf := func(id store.LogicalMessageID) int64 {
				t.Helper()
				for _, m := range a.all(100, nil) {
					if m.ID == id {
						return m.Sequence
					}
				}
				t.Fatalf("%s not pending", id)
				return 0
			}
			next := func(text string) store.LogicalMessageID {
				t.Helper()
				id := a.send(bob, text)
				s := seqOf(id)
				require.Greater(t, s, last)
				last = s
				return id
			}
			m1 := next("1")
			require.Equal(t, client.Abandoned, a.abandon(bob, m1)) // highest, abandoned
			m2 := next("2")
			next("3")
			b.poll()
			a.poll() // ACKs remove everything, the highest included
			require.Zero(t, a.count(nil))
			m4 := next("4")
			require.Equal(t, client.Abandoned, a.abandon(bob, m4))
			if kind == sqliteKind {
				a.reopen()
			}
			next("5")
			next("6")
			_ = m2
		})
	}
}
