package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// countingPending counts the pages read through it.
type countingPending struct {
	store.Pending
	pages atomic.Int64
}

func (c *countingPending) PendingMessages(ctx context.Context, req store.PageRequest) (store.PendingMessagePage, error) {
	c.pages.Add(1)
	return c.Pending.PendingMessages(ctx, req)
}

// walked is one step of a walk: a message, or the error yielded with it.
type walked struct {
	m   store.PendingMessage
	err error
}

// walkAll runs WalkPendingMessages to its end, calling body after each
// step (its index and what it yielded), and returns every step.
func (h *harness) walkAll(p store.Pending, req store.PageRequest, body func(i int, w walked)) []walked {
	h.t.Helper()
	var out []walked
	for m, err := range storeimpl.WalkPendingMessages(h.ctx, p, req) {
		require.Less(h.t, len(out), 10000, "the walk does not end")
		w := walked{m, err}
		out = append(out, w)
		if body != nil {
			body(len(out)-1, w)
		}
	}
	return out
}

func messagesOf(t *testing.T, ws []walked) []store.PendingMessage {
	t.Helper()
	var out []store.PendingMessage
	for _, w := range ws {
		require.NoError(t, w.err)
		out = append(out, w.m)
	}
	return out
}

// The walk yields exactly what the pages hold, in order, on any page size,
// all or one recipient's, and from a cursor.
func testWalk(t *testing.T, h *harness) {
	require.Empty(t, h.walkAll(h.s, store.PageRequest{Limit: 3}, nil), "an empty queue yields nothing")
	ms := h.seed(11, alice, bob, aliceTwo)
	for _, tc := range []struct {
		name string
		req  store.PageRequest
		want []msg
	}{
		{"page of 1", store.PageRequest{Limit: 1}, ms},
		{"page of 4", store.PageRequest{Limit: 4}, ms},
		{"one page", store.PageRequest{Limit: store.MaxPageSize}, ms},
		{"a page ends on the last", store.PageRequest{Limit: 11}, ms},
		{"recipient", store.PageRequest{Limit: 2, Recipient: ptr(alice)}, filter(ms, alice)},
		{"from a cursor", store.PageRequest{Limit: 3, After: ptr(ms[4].seq)}, ms[5:]},
		{"recipient from a cursor", store.PageRequest{Limit: 1, After: ptr(ms[4].seq), Recipient: ptr(bob)}, filter(ms[5:], bob)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &countingPending{Pending: h.s}
			var got []walked
			opens := h.opens(func() { got = h.walkAll(c, tc.req, nil) })
			require.Equal(t, pendings(tc.want...), messagesOf(t, got))
			require.EqualValues(t, len(tc.want), opens, "each message opened once, the probe rows never")
			pages := max(1, (len(tc.want)+tc.req.Limit-1)/tc.req.Limit) // a full last page has no cursor
			require.EqualValues(t, pages, c.pages.Load(), "one call per page")
		})
	}
}

// An unreadable row is yielded in its place as an *UnreadableError
// holding it alone, and the walk goes on past it.
func testWalkUnreadable(t *testing.T, h *harness) {
	ms := h.seed(7, alice, bob)
	foreign := NewKeyring(t)
	bad := map[int64]bool{ms[0].seq: true, ms[3].seq: true, ms[4].seq: true, ms[6].seq: true}
	for seq := range bad {
		var m msg
		for _, x := range ms {
			if x.seq == seq {
				m = x
			}
		}
		h.tamper.SetSealed(t, h.s, seq, sealFor(t, foreign, m.to, m.id, m.text))
	}
	for _, limit := range []int{1, 2, 3, store.MaxPageSize} {
		got := h.walkAll(h.s, store.PageRequest{Limit: limit}, nil)
		require.Len(t, got, len(ms), "limit %d", limit)
		for i, w := range got {
			if !bad[ms[i].seq] {
				require.NoError(t, w.err)
				require.Equal(t, ms[i].pending(), w.m)
				continue
			}
			var ue *store.UnreadableError
			require.ErrorAs(t, w.err, &ue)
			require.ErrorIs(t, w.err, store.ErrUnreadable)
			require.ErrorIs(t, w.err, seal.ErrWrongKey)
			require.Equal(t, []store.UnreadablePendingMessage{{PendingMessage: store.PendingMessage{Sequence: ms[i].seq, Recipient: ms[i].to, ID: ms[i].id}, Cause: ue.Entries[0].Cause}}, ue.Entries)
			require.Equal(t, store.PendingMessage{}, w.m, "no plaintext with an unreadable row")
		}
	}
}

// Between pages (after the last message of each page, the walk's page
// size being 2), a message already yielded is acknowledged (CommitAck),
// one not yet reached is abandoned, and one is sent: nothing is yielded twice, the
// abandoned one never, the sent ones later, everything else once, in
// order.
func testWalkUnderMutation(t *testing.T, h *harness) {
	ms := h.seed(8, alice, bob)
	live := map[int64]msg{}
	for _, m := range ms {
		live[m.seq] = m
	}
	order := append([]msg(nil), ms...)
	var abandoned []int64
	sent := 0
	del := func(m msg) {
		ok, err := h.s.AbandonPending(h.ctx, m.to, m.id)
		require.NoError(t, err)
		require.True(t, ok)
		delete(live, m.seq)
	}
	got := h.walkAll(h.s, store.PageRequest{Limit: 2}, func(i int, w walked) {
		require.NoError(t, w.err)
		if i%2 == 0 {
			return // mid-page
		}
		acked := live[w.m.Sequence] // acknowledged once yielded
		cleared, err := h.s.CommitAck(h.ctx, acked.to, acked.id, store.Inbound{Update: store.PeerState{Session: []byte("session")}})
		require.NoError(t, err)
		require.True(t, cleared)
		delete(live, acked.seq)
		var ahead []msg
		for _, m := range order {
			if _, ok := live[m.seq]; ok && m.seq > w.m.Sequence {
				ahead = append(ahead, m)
			}
		}
		if len(ahead) > 1 {
			del(ahead[1])
			abandoned = append(abandoned, ahead[1].seq)
		}
		if sent < 3 {
			m := h.insert([]store.DeviceAddress{alice, bob}[sent%2], 100+sent)
			sent++
			live[m.seq] = m
			order = append(order, m)
		}
	})
	var want []store.PendingMessage
	for _, m := range order {
		if !contains(abandoned, m.seq) {
			want = append(want, m.pending())
		}
	}
	require.Equal(t, want, messagesOf(t, got))
	require.NotEmpty(t, abandoned)
	require.Equal(t, 3, sent)
	late := 0
	for _, w := range got {
		if w.m.Sequence > ms[len(ms)-1].seq {
			late++
		}
	}
	require.Positive(t, late, "messages sent during the walk were yielded")
}

// Breaking out of the loop stops the walk: no page is read after it.
func testWalkBreak(t *testing.T, h *harness) {
	ms := h.seed(5, alice)
	for _, tc := range []struct {
		name  string
		after int // messages taken before the break
		pages int64
	}{
		{"mid-page", 1, 1},
		{"end of a page", 2, 1},
		{"first of a page", 3, 2},
		{"last message", 5, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &countingPending{Pending: h.s}
			var got []store.PendingMessage
			opens := h.opens(func() {
				for m, err := range storeimpl.WalkPendingMessages(h.ctx, c, store.PageRequest{Limit: 2}) {
					require.NoError(t, err)
					got = append(got, m)
					if len(got) == tc.after {
						break
					}
				}
			})
			require.Equal(t, pendings(ms[:tc.after]...), got)
			require.Equal(t, tc.pages, c.pages.Load())
			require.EqualValues(t, min(int64(len(ms)), 2*tc.pages), opens, "only the pages read were opened")
		})
	}
}

// A context that ends stops the walk with ctx.Err(), yielded once, with
// no page read after it.
func testWalkContext(t *testing.T, h *harness) {
	ms := h.seed(5, alice)
	t.Run("done before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(h.ctx)
		cancel()
		c := &countingPending{Pending: h.s}
		var errs []error
		for m, err := range storeimpl.WalkPendingMessages(ctx, c, store.PageRequest{Limit: 2}) {
			require.Equal(t, store.PendingMessage{}, m)
			errs = append(errs, err)
		}
		require.Equal(t, []error{context.Canceled}, errs)
		require.Zero(t, c.pages.Load())
	})
	for _, at := range []int{1, 2} { // mid-page, end of a page
		t.Run("cancelled in the loop", func(t *testing.T) {
			ctx, cancel := context.WithCancel(h.ctx)
			defer cancel()
			c := &countingPending{Pending: h.s}
			var got []walked
			for m, err := range storeimpl.WalkPendingMessages(ctx, c, store.PageRequest{Limit: 2}) {
				got = append(got, walked{m, err})
				if len(got) == at {
					cancel()
				}
			}
			require.Len(t, got, at+1)
			require.Equal(t, pendings(ms[:at]...), messagesOf(t, got[:at]))
			require.Equal(t, walked{err: context.Canceled}, got[at])
			require.EqualValues(t, 1, c.pages.Load())
		})
	}
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(h.ctx, time.Unix(0, 0))
		defer cancel()
		var errs []error
		for _, err := range storeimpl.WalkPendingMessages(ctx, h.s, store.PageRequest{Limit: 2}) {
			errs = append(errs, err)
		}
		require.Equal(t, []error{context.DeadlineExceeded}, errs)
	})
}

// Any other error is yielded once and ends the walk: an invalid request,
// a closed store.
func testWalkError(t *testing.T, h *harness) {
	h.seed(3, alice)
	var errs []error
	for _, err := range storeimpl.WalkPendingMessages(h.ctx, h.s, store.PageRequest{Limit: 0}) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], store.ErrInvalidArgument)

	failing := &failAfter{Pending: h.s, ok: 1, err: errors.New("disk on fire")}
	var got []walked
	for m, err := range storeimpl.WalkPendingMessages(h.ctx, failing, store.PageRequest{Limit: 2}) {
		got = append(got, walked{m, err})
	}
	require.Len(t, got, 3, "the first page, then the error")
	require.NoError(t, got[1].err)
	require.ErrorIs(t, got[2].err, failing.err)
	require.Equal(t, store.PendingMessage{}, got[2].m)

	require.NoError(t, h.s.Close())
	errs = nil
	for _, err := range storeimpl.WalkPendingMessages(h.ctx, h.s, store.PageRequest{Limit: 2}) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], store.ErrClosed)
}

// failAfter reads ok pages through and then fails every page with err.
type failAfter struct {
	store.Pending
	ok  int
	err error
}

func (f *failAfter) PendingMessages(ctx context.Context, req store.PageRequest) (store.PendingMessagePage, error) {
	if f.ok == 0 {
		return store.PendingMessagePage{}, f.err
	}
	f.ok--
	return f.Pending.PendingMessages(ctx, req)
}
